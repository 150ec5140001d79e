package dev.wiggle.worker;

import dev.wiggle.proto.v1.Task;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanBuilder;
import io.opentelemetry.api.trace.SpanContext;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.api.trace.TraceFlags;
import io.opentelemetry.api.trace.TraceState;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.Scope;
import io.opentelemetry.exporter.otlp.trace.OtlpGrpcSpanExporter;
import io.opentelemetry.sdk.common.CompletableResultCode;
import io.opentelemetry.sdk.resources.Resource;
import io.opentelemetry.sdk.trace.IdGenerator;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.opentelemetry.sdk.trace.export.BatchSpanProcessor;
import io.opentelemetry.sdk.trace.export.SpanExporter;
import io.opentelemetry.sdk.trace.samplers.Sampler;
import java.time.Duration;
import java.util.Collection;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;

/** The OpenTelemetry SDK as a Wiggle worker runs it, configured by the OTEL_* variables. */
final class OtelStepSpans implements StepSpans {
  /** The span id the span being started on this thread is for (startSpan is synchronous). */
  private static final ThreadLocal<String> WANTED = new ThreadLocal<>();

  private final SdkTracerProvider provider;
  private final Tracer tracer;
  final AtomicLong dropped = new AtomicLong();

  private OtelStepSpans(SdkTracerProvider provider) {
    this.provider = provider;
    this.tracer = provider.get("wiggle-java");
  }

  static OtelStepSpans create(Map<String, String> env, System.Logger log) {
    String endpoint = env.getOrDefault("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "");
    if (endpoint.isEmpty()) {
      endpoint = env.getOrDefault("OTEL_EXPORTER_OTLP_ENDPOINT", "");
    }
    if (endpoint.isEmpty()) {
      endpoint = "http://localhost:4317";
    }
    AtomicLong dropped = new AtomicLong();
    SpanExporter counting = counting(OtlpGrpcSpanExporter.builder().setEndpoint(endpoint).build(),
        dropped, log);
    IdGenerator random = IdGenerator.random();
    IdGenerator ids = new IdGenerator() {
      @Override
      public String generateSpanId() {
        String wanted = WANTED.get();
        WANTED.remove();
        return wanted != null ? wanted : random.generateSpanId();
      }

      @Override
      public String generateTraceId() {
        return random.generateTraceId();
      }
    };
    String service = env.getOrDefault("OTEL_SERVICE_NAME", "");
    Resource resource = Resource.getDefault().merge(Resource.create(Attributes.of(
        AttributeKey.stringKey("service.name"), service.isEmpty() ? "wiggle-worker-java" : service)));
    long delay = 5000;
    try {
      delay = Long.parseLong(env.getOrDefault("OTEL_BSP_SCHEDULE_DELAY", "5000").strip());
    } catch (NumberFormatException e) {
      // the default
    }
    SdkTracerProvider provider = SdkTracerProvider.builder()
        .setIdGenerator(ids)
        .setResource(resource)
        .setSampler(sampler(env))
        .addSpanProcessor(BatchSpanProcessor.builder(counting)
            .setScheduleDelay(Duration.ofMillis(delay)).build())
        .build();
    OtelStepSpans spans = new OtelStepSpans(provider);
    spans.dropped.set(0);
    return spans;
  }

  private static Sampler sampler(Map<String, String> env) {
    String name = env.getOrDefault("OTEL_TRACES_SAMPLER", "parentbased_always_on").strip()
        .toLowerCase();
    double ratio = 1.0;
    try {
      ratio = Double.parseDouble(env.getOrDefault("OTEL_TRACES_SAMPLER_ARG", "1"));
    } catch (NumberFormatException e) {
      // the default
    }
    Sampler root = name.endsWith("always_off") ? Sampler.alwaysOff()
        : name.endsWith("traceidratio") ? Sampler.traceIdRatioBased(ratio) : Sampler.alwaysOn();
    return name.startsWith("parentbased") ? Sampler.parentBased(root) : root;
  }

  private static SpanExporter counting(SpanExporter inner, AtomicLong dropped, System.Logger log) {
    return new SpanExporter() {
      @Override
      public CompletableResultCode export(Collection<SpanData> spans) {
        CompletableResultCode result = inner.export(spans);
        result.whenComplete(() -> {
          if (!result.isSuccess() && dropped.getAndAdd(spans.size()) == 0) {
            log.log(System.Logger.Level.WARNING,
                "spans not delivered to the OTLP endpoint (counted, not retried)");
          }
        });
        return result;
      }

      @Override
      public CompletableResultCode flush() {
        return inner.flush();
      }

      @Override
      public CompletableResultCode shutdown() {
        return inner.shutdown();
      }
    };
  }

  private static SpanContext remote(TraceIds.Parent trace, String spanId, TraceState state) {
    return SpanContext.createFromRemoteParent(trace.traceId(), spanId,
        TraceFlags.fromByte((byte) trace.flags()), state);
  }

  @Override
  public Outcome run(Task t, Step s, Supplier<Outcome> call) {
    TraceIds.Parent trace = TraceIds.parse(t.getTraceparent());
    if (trace == null) {
      trace = new TraceIds.Parent(TraceIds.traceIdFor(t.getInstanceId()), "", 1);
    }
    TraceState state = TraceState.getDefault();
    SpanContext parent = remote(trace, TraceIds.instanceSpanId(t.getInstanceId()), state);
    SpanBuilder b = tracer.spanBuilder("step " + s.activity())
        .setParent(Context.root().with(Span.wrap(parent)))
        .setSpanKind(SpanKind.CONSUMER)
        .setAttribute("wiggle.instance.id", t.getInstanceId())
        .setAttribute("wiggle.flow.name", t.getFlow())
        .setAttribute("wiggle.flow.version", t.getVersion())
        .setAttribute("wiggle.node.id", s.nodeId())
        .setAttribute("wiggle.activity", s.activity())
        .setAttribute("wiggle.step.attempt", (long) s.attempt())
        .setAttribute("wiggle.execution.mode", s.mode())
        .setAttribute("wiggle.queue", t.getQueue())
        .setAttribute("wiggle.task.id", t.getTaskId())
        .setAttribute("wiggle.run.position", (long) s.position());
    if (s.attempt() > 1) {
      b.addLink(remote(trace, TraceIds.stepSpanId(t.getInstanceId(), t.getTaskId(), s.nodeId(),
          s.attempt() - 1, s.loops()), state));
    }
    if (!s.previous().isEmpty()) {
      b.addLink(remote(trace, s.previous(), state));
    }
    WANTED.set(TraceIds.stepSpanId(t.getInstanceId(), t.getTaskId(), s.nodeId(), s.attempt(),
        s.loops()));
    Span span;
    try {
      span = b.startSpan();
    } finally {
      WANTED.remove();
    }
    try (Scope scope = span.makeCurrent()) {
      Outcome out = call.get();
      if (out.failure() != null) {
        Outcome.Failure f = out.failure();
        span.setAttribute("wiggle.step.outcome", "failed");
        span.setAttribute("error.type", f.errorType().isEmpty() ? "Error" : f.errorType());
        span.setAttribute("wiggle.step.non_retryable", f.nonRetryable());
        span.setStatus(StatusCode.ERROR, f.message());
        span.addEvent("exception", Attributes.of(
            AttributeKey.stringKey("exception.type"), f.errorType(),
            AttributeKey.stringKey("exception.message"), f.message()));
      } else if (out.predicate() != null) {
        span.setAttribute("wiggle.step.outcome", out.predicate() ? "true" : "false");
      } else {
        span.setAttribute("wiggle.step.outcome", "completed");
      }
      return out;
    } finally {
      span.end();
    }
  }

  @Override
  public void shutdown() {
    provider.shutdown().join(2, TimeUnit.SECONDS);
  }
}
