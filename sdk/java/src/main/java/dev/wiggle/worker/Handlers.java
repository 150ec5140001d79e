package dev.wiggle.worker;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.NullNode;
import java.io.IOException;

/**
 * Runs one step's handler and turns whatever happens (an exception, a result over the server's
 * payload limit or nested too deeply, a predicate that is not a boolean) into an {@link Outcome},
 * so that no user mistake escapes into the worker's own loops.
 */
final class Handlers {
  private Handlers() {}

  /**
   * @param asPredicate the node is a predicate: a boolean is needed. A task handler's non-boolean
   *     result there comes back as a context, which the caller reports as it is so the server
   *     fails the step exactly as it does for a SERVER-mode CompleteTask.
   * @param maxPayloadBytes the server's limit on a result (0: an older server, 4 MiB assumed)
   */
  static Outcome run(
      Registry.Handler h,
      String name,
      byte[] input,
      StepInfo step,
      boolean asPredicate,
      long maxPayloadBytes,
      Lease lease) {
    if (h == null) {
      return Outcome.failed(
          "no activity named '" + name + "' is registered on this worker", false, "ActivityNotFound");
    }
    JsonNode in;
    try {
      in = Json.parse(input);
    } catch (IOException e) {
      return Outcome.failed("the step's input is not JSON: " + e.getMessage(), true, "InvalidInput");
    }
    lease.enterHandler();
    try {
      if (h.predicate() != null) {
        boolean v = h.predicate().test(in, step);
        return asPredicate ? Outcome.ofPredicate(v) : Outcome.ofContext(Json.write(
            com.fasterxml.jackson.databind.node.BooleanNode.valueOf(v)));
      }
      JsonNode result = h.task().execute(in, step);
      if (result == null) {
        result = NullNode.getInstance();
      }
      if (asPredicate && result.isBoolean()) {
        return Outcome.ofPredicate(result.booleanValue());
      }
      return checked(name, result, maxPayloadBytes);
    } catch (NonRetryableException e) {
      return Outcome.failed(message(e), true, e.getClass().getSimpleName());
    } catch (Exception | StackOverflowError | AssertionError | LinkageError e) {
      return Outcome.failed(message(e), false, e.getClass().getSimpleName());
    } finally {
      lease.exitHandler();
    }
  }

  /** A task's result, or the non-retryable failure the server would make of it anyway. */
  static Outcome checked(String name, JsonNode result, long maxPayloadBytes) {
    int depth = Json.depth(result);
    if (depth > Json.MAX_DEPTH) {
      return Outcome.failed("step result nests " + depth + " levels deep; the limit is "
          + Json.MAX_DEPTH, true, "PayloadTooDeep");
    }
    byte[] bytes = Json.write(result);
    long limit = Limits.payload(maxPayloadBytes);
    if (bytes.length > limit) {
      return Outcome.failed("step result is " + bytes.length + " bytes; the limit is " + limit
          + " bytes (max_payload_bytes)", true, "PayloadTooLarge");
    }
    return Outcome.ofContext(bytes);
  }

  private static String message(Throwable e) {
    String m = e.getMessage();
    return m == null || m.isEmpty() ? e.getClass().getSimpleName() : m;
  }
}
