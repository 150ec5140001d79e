package dev.wiggle.worker;

import dev.wiggle.proto.v1.Task;
import java.util.Map;
import java.util.function.Supplier;

/**
 * Makes one span per step attempt while tracing is on (docs/observability.md). The one
 * implementation, {@link OtelStepSpans}, is the only class that names OpenTelemetry: it is loaded
 * only when the OTEL_* variables turn tracing on, so a worker without them pays nothing.
 */
interface StepSpans {
  /** The step a span is for; {@code previous}: the span id of the step before it in the run. */
  record Step(String nodeId, String activity, int attempt, String mode,
      Map<String, Integer> loops, int position, String previous) {}

  Outcome run(Task t, Step step, Supplier<Outcome> call);

  /** Buffered spans go out, two seconds at most. */
  void shutdown();

  /** The tracer the OTEL_* variables ask for, or null when tracing is off. */
  static StepSpans fromEnvironment(System.Logger log) {
    if (!TraceIds.tracingEnabled(System.getenv())) {
      return null;
    }
    return OtelStepSpans.create(System.getenv(), log);
  }
}
