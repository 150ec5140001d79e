package dev.wiggle.conformance;

import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.wiggle.worker.Json;
import dev.wiggle.worker.StepInfo;
import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;

/**
 * The conformance trace: before every invocation, one JSON line appended to the file named by
 * {@code WIGGLE_CONFORMANCE_TRACE}, in one unbuffered write on a file opened for appending
 * (O_APPEND), so concurrent invocations never interleave and a worker killed right after leaves
 * the whole line behind. The runner counts executions from it.
 */
final class Trace {
  static final String ENV = "WIGGLE_CONFORMANCE_TRACE";

  private static FileOutputStream out;
  private static String openPath;

  private Trace() {}

  static synchronized void write(String activity, StepInfo step) {
    String path = System.getenv(ENV);
    if (path == null || path.isEmpty()) {
      return;
    }
    ObjectNode line = JsonNodeFactory.instance.objectNode()
        .put("instance_id", step.instanceId())
        .put("flow", step.flow())
        .put("node_id", step.nodeId())
        .put("activity", activity)
        .put("attempt", step.attempt());
    byte[] bytes = (Json.toString(line) + "\n").getBytes(StandardCharsets.UTF_8);
    try {
      if (out == null || !path.equals(openPath)) {
        if (out != null) {
          out.close();
        }
        out = new FileOutputStream(path, true);
        openPath = path;
      }
      out.write(bytes); // one write(2) of the whole line
    } catch (IOException e) {
      // No trace is the runner's problem to report, not a reason to fail the step.
      System.err.println("conformance trace: " + e.getMessage());
    }
  }
}
