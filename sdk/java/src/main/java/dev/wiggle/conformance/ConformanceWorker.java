package dev.wiggle.conformance;

import dev.wiggle.worker.Connection;
import dev.wiggle.worker.Worker;
import java.time.Duration;

/**
 * Serves the conformance activities with the Java worker, so that {@code wiggle conformance
 * --worker 'java -jar sdk/java/target/wiggle-conformance-worker.jar'} runs the corpus against it.
 *
 * <p>Environment: {@code WIGGLE_ADDRESS} (host:port, required here), the other connection
 * variables of {@link Connection#fromEnvironment()}, {@code WIGGLE_QUEUES}
 * (comma-separated, default {@code default,other}), {@code WIGGLE_CONCURRENCY} (default 64),
 * {@code WIGGLE_CONFORMANCE_BATCH_SIZE} (the LOCAL_ASYNC batch size, default 64), and
 * {@code WIGGLE_CONFORMANCE_TRACE} (the trace file the activities append to). SIGTERM drains
 * (running steps finish, buffered runs are handed back) and exits 0, or 1 when the drain timed
 * out.
 */
public final class ConformanceWorker {
  private ConformanceWorker() {}

  public static void main(String[] args) throws InterruptedException {
    String address = System.getenv("WIGGLE_ADDRESS");
    if (address == null || address.isEmpty()) {
      System.err.println("wiggle-conformance-worker: set WIGGLE_ADDRESS to the server's host:port");
      System.exit(2);
    }
    String queues = env("WIGGLE_QUEUES", "default,other");
    int concurrency = positive("WIGGLE_CONCURRENCY", "64");
    int batch = positive("WIGGLE_CONFORMANCE_BATCH_SIZE", "64");
    Connection connection = null;
    try {
      connection = Connection.fromEnvironment();
    } catch (IllegalArgumentException e) { // a bad variable: say which, no stack trace
      System.err.println("wiggle-conformance-worker: " + e.getMessage());
      System.exit(2);
    }
    Worker.Builder b = Worker.builder()
        .connection(connection)
        .queues(queues.split(","))
        .concurrency(concurrency)
        .localBatchSize(batch)
        .pollWait(Duration.ofSeconds(2));
    if (!ConformanceActivities.register(b).build().runUntilShutdown()) {
      System.exit(1); // the drain timed out: what was still held was dropped
    }
  }

  private static int positive(String name, String otherwise) {
    String v = env(name, otherwise);
    try {
      int n = Integer.parseInt(v);
      if (n > 0) {
        return n;
      }
    } catch (NumberFormatException e) {
      // reported below
    }
    System.err.println("wiggle-conformance-worker: " + name + "=" + v + " is not a positive integer");
    System.exit(2);
    return 0;
  }

  private static String env(String name, String otherwise) {
    String v = System.getenv(name);
    return v == null || v.isEmpty() ? otherwise : v;
  }
}
