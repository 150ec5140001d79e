// The throughput benchmark's worker in Java: `wiggle bench throughput --worker-command` runs it
// once per worker process (docs/benchmarks.md, "Workers in another language").
//
// A single-file source program (Java 11+ compiles and runs it in one step), built on the SDK's
// public API only, so it runs against any SDK jar that carries its dependencies, an older one
// included:
//
//   mvn -B -ntp -q -o -f sdk/java/pom.xml -DskipTests package
//   wiggle bench throughput --database postgres --modes SERVER,LOCAL_SYNC \
//     --worker-command 'java -cp sdk/java/target/wiggle-conformance-worker.jar sdk/java/bench/BenchWorker.java'
//
// It registers `bench_step`, the activity of wiggle/bench/_handlers.py with the same semantics:
// it returns its input with `n` (0 when absent) plus one, and an input whose `fail_at` equals
// `n` fails for good (the benchmark's --inject-failure). It serves WIGGLE_BENCH_QUEUE with
// WIGGLE_BENCH_CONCURRENCY slots, connects with the WIGGLE_* connection variables
// (Connection.fromEnvironment: WIGGLE_ADDRESS, ...), and drains and exits 0 on SIGTERM. It logs
// warnings and errors only, as the benchmark's `wiggle worker --log-level warning` processes do.

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.wiggle.worker.Connection;
import dev.wiggle.worker.NonRetryableException;
import dev.wiggle.worker.Worker;
import java.util.logging.Level;
import java.util.logging.Logger;

public final class BenchWorker {
  /** Held: java.util.logging keeps only weak references to its loggers. */
  private static final Logger SDK_LOG = Logger.getLogger("dev.wiggle.worker");

  private BenchWorker() {}

  /** bench_step: the input with n + 1; fails for good at n == fail_at. */
  static JsonNode benchStep(JsonNode ctx) {
    if (!ctx.isObject()) {
      throw new NonRetryableException("bench_step takes a JSON object");
    }
    long n = ctx.path("n").asLong(0);
    JsonNode failAt = ctx.get("fail_at");
    if (failAt != null && failAt.isIntegralNumber() && failAt.asLong() == n) {
      throw new NonRetryableException("injected failure at n=" + n);
    }
    ObjectNode next = ((ObjectNode) ctx).deepCopy();
    return next.put("n", n + 1);
  }

  private static String env(String name, String fallback) {
    String value = System.getenv(name);
    return value == null || value.isEmpty() ? fallback : value;
  }

  public static void main(String[] args) throws Exception {
    SDK_LOG.setLevel(Level.WARNING);
    String queue = env("WIGGLE_BENCH_QUEUE", "default");
    int concurrency = Integer.parseInt(env("WIGGLE_BENCH_CONCURRENCY", "16"));
    Worker worker = Worker.builder()
        .connection(Connection.fromEnvironment())
        .queues(queue)
        .concurrency(concurrency)
        .register("bench_step", (ctx, step) -> benchStep(ctx))
        .build();
    worker.runUntilShutdown(); // void in the first SDK, a boolean (drained) later
    System.exit(0);
  }
}
