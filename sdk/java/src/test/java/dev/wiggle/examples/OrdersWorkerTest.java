package dev.wiggle.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.wiggle.worker.Connection;
import dev.wiggle.worker.Worker;
import org.junit.jupiter.api.Test;

/** The README's worker builds, with both activities registered. */
class OrdersWorkerTest {
  @Test
  void theReadmeWorkerBuilds() {
    Worker w = OrdersWorker.build(Connection.to("127.0.0.1:1"));
    try {
      assertEquals(java.util.List.of("in_stock", "validate"), w.activities());
      assertEquals(java.util.List.of("orders"), w.queues());
    } finally {
      w.close();
    }
  }
}
