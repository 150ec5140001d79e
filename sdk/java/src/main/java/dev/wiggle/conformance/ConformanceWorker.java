package dev.wiggle.conformance;

import dev.wiggle.worker.Connection;
import dev.wiggle.worker.Worker;
import java.time.Duration;

/**
 * Serves the conformance activities with the Java worker, so that {@code wiggle conformance
 * --worker 'java -jar sdk/java/target/wiggle-conformance-worker.jar'} runs the corpus against it.
 *
 * <p>Environment: {@code WIGGLE_ADDRESS} (host:port, required), {@code WIGGLE_AUTH_TOKEN}, the
 * {@code WIGGLE_TLS*} variables of {@link Connection#fromEnvironment()}, {@code WIGGLE_QUEUES}
 * (comma-separated, default {@code default,other}), {@code WIGGLE_CONCURRENCY} (default 64), and
 * {@code WIGGLE_CONFORMANCE_TRACE} (the trace file the activities append to). SIGTERM drains
 * (running steps finish, buffered runs are handed back) and exits.
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
    int concurrency;
    try {
      concurrency = Integer.parseInt(env("WIGGLE_CONCURRENCY", "64"));
    } catch (NumberFormatException e) {
      concurrency = 0;
    }
    if (concurrency <= 0) {
      System.err.println("wiggle-conformance-worker: WIGGLE_CONCURRENCY is not a positive integer");
      System.exit(2);
    }
    Worker.Builder b = Worker.builder()
        .connection(Connection.fromEnvironment())
        .queues(queues.split(","))
        .concurrency(concurrency)
        .pollWait(Duration.ofSeconds(2));
    ConformanceActivities.register(b).build().runUntilShutdown();
  }

  private static String env(String name, String otherwise) {
    String v = System.getenv(name);
    return v == null || v.isEmpty() ? otherwise : v;
  }
}
