package dev.wiggle.examples;

import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.wiggle.worker.Connection;
import dev.wiggle.worker.NonRetryableException;
import dev.wiggle.worker.Worker;

/** The worker of the README, kept here so that it compiles with the SDK it documents. */
public final class OrdersWorker {
  private OrdersWorker() {}

  public static Worker build(Connection connection) {
    return Worker.builder()
        .connection(connection) // or Connection.fromEnvironment(): WIGGLE_ADDRESS, ...
        .queues("orders")
        .concurrency(16)
        .register("validate", (order, step) -> {
          if (!order.isObject()) {
            throw new NonRetryableException("an order is a JSON object"); // fail now, no retry
          }
          // step: instance id, node id, attempt (an idempotency key), flow, version, mode
          ObjectNode next = order.deepCopy();
          return next.put("validated_by", step.instanceId() + "/" + step.nodeId());
        })
        .registerPredicate("in_stock", (order, step) -> order.path("qty").asInt() <= 10)
        .build();
  }

  public static void main(String[] args) throws InterruptedException {
    build(Connection.fromEnvironment()).runUntilShutdown(); // serves until SIGTERM, then drains
  }
}
