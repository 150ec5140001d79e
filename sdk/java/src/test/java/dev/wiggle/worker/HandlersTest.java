package dev.wiggle.worker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.BooleanNode;
import dev.wiggle.graph.ExecutionMode;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** Whatever a handler does becomes an outcome; nothing escapes into the worker. */
class HandlersTest {
  private static final StepInfo STEP =
      new StepInfo("i", "n", 2, "f", "v", "act", ExecutionMode.SERVER, "t");

  private static Outcome run(Registry.Handler h, String input, boolean asPredicate, long limit) {
    Lease lease = new Lease("t", "L", "n", 60_000);
    return Handlers.run(h, "act", input.getBytes(StandardCharsets.UTF_8), STEP, asPredicate, limit, lease);
  }

  @Test
  void anUnknownActivityFails() {
    Outcome o = run(null, "{}", false, 0);
    assertTrue(o.failure().message().contains("no activity named 'act'"));
  }

  @Test
  void anExceptionIsARetryableFailureAndNonRetryableIsNot() {
    Outcome o = run(new Registry.Handler((in, s) -> {
      throw new IllegalStateException("nope");
    }, null), "{}", false, 0);
    assertEquals("nope", o.failure().message());
    assertEquals("IllegalStateException", o.failure().errorType());
    assertTrue(!o.failure().nonRetryable());
    o = run(new Registry.Handler((in, s) -> {
      throw new NonRetryableException("never");
    }, null), "{}", false, 0);
    assertTrue(o.failure().nonRetryable());
    assertEquals("never", o.failure().message());
  }

  @Test
  void aTaskHandlerAtAPredicateMayReturnABoolean() {
    Outcome o = run(new Registry.Handler((in, s) -> BooleanNode.TRUE, null), "{}", true, 0);
    assertEquals(Boolean.TRUE, o.predicate());
    o = run(new Registry.Handler((in, s) -> in, null), "{\"x\":1}", true, 0);
    assertNull(o.predicate()); // not a boolean: reported as it is, for the server to judge
    assertEquals("{\"x\":1}", new String(o.context(), StandardCharsets.UTF_8));
  }

  @Test
  void aPredicateAtATaskNodeReportsJsonBoolean() {
    Outcome o = run(new Registry.Handler(null, (in, s) -> false), "{}", false, 0);
    assertEquals("false", new String(o.serverResult(), StandardCharsets.UTF_8));
  }

  @Test
  void aResultNestedTooDeeplyFailsForGood() {
    JsonNode deep;
    try {
      deep = Json.parse("[".repeat(129) + "]".repeat(129));
    } catch (java.io.IOException e) {
      throw new AssertionError(e);
    }
    Outcome o = run(new Registry.Handler((in, s) -> deep, null), "{}", false, 0);
    assertTrue(o.failure().nonRetryable());
    assertTrue(o.failure().message().contains("129") && o.failure().message().contains("128"),
        o.failure().message());
  }

  @Test
  void annotatedMethodsRegisterAsTasksAndPredicates() throws Exception {
    Registry r = new Registry();
    r.addAnnotated(new Object() {
      @WiggleActivity("echo")
      public JsonNode echo(JsonNode in) {
        return in;
      }

      @WiggleActivity
      public boolean second(JsonNode in, StepInfo s) {
        return s.attempt() == 2;
      }
    });
    assertEquals(java.util.List.of("echo", "second"), r.names());
    assertEquals("[1]", new String(run(r.get("echo"), "[1]", false, 0).context(), StandardCharsets.UTF_8));
    assertEquals(Boolean.TRUE, run(r.get("second"), "{}", true, 0).predicate());
  }
}
