package dev.wiggle.worker;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * A task handler: it receives the context (any JSON value) and returns the next context. A
 * join's combine and an await's apply are activities too; they receive the shapes documented in
 * docs/graph.md ({@code {"context": C, "results": R}} and {@code {"context": C, "signal": S}}).
 *
 * <p>Throwing fails the attempt and leaves the step's retry policy in charge; {@link
 * NonRetryableException} fails the step for good. A handler may run more than once for one step
 * (execution is at-least-once): {@link StepInfo} gives it an idempotency key.
 */
@FunctionalInterface
public interface Activity {
  JsonNode execute(JsonNode input, StepInfo step) throws Exception;
}
