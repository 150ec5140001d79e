/**
 * A span per step attempt, with the span id the server derived for it (docs/observability.md).
 * Off unless the standard OTEL_* variables turn it on; the OpenTelemetry packages
 * (@opentelemetry/api, sdk-trace, resources, exporter-trace-otlp-grpc: optional peer
 * dependencies) are loaded only then, so a worker without them pays nothing.
 */
import type { Logger } from "./log.js";
import type { Outcome } from "./activity.js";
import type { Task } from "./rpc.js";
import { deriveTrace, instanceSpanId, parseTraceparent, stepSpanId } from "./tracecontext.js";

type Env = Readonly<Record<string, string | undefined>>;

/**
 * Tracing is on when an OTLP endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT or
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or OTEL_TRACES_EXPORTER names an exporter, unless
 * OTEL_SDK_DISABLED is true or OTEL_TRACES_EXPORTER is `none`: the rule of every SDK.
 */
export function tracingEnabled(env: Env = process.env): boolean {
  if ((env.OTEL_SDK_DISABLED ?? "").trim().toLowerCase() === "true") {
    return false;
  }
  const exporter = (env.OTEL_TRACES_EXPORTER ?? "").trim().toLowerCase();
  if (exporter === "none") {
    return false;
  }
  const endpoint = (env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? "") + (env.OTEL_EXPORTER_OTLP_ENDPOINT ?? "");
  return endpoint !== "" || exporter !== "";
}

/** The step a span is for. */
export interface StepSpan {
  readonly nodeId: string;
  readonly activity: string;
  readonly attempt: number;
  readonly mode: string;
  readonly loops: Readonly<Record<string, number>>;
  readonly position: number;
  /** The span id of the step before it in this local run ("" for the first). */
  readonly previous: string;
}

/** Makes the spans; built by `loadTracer` when tracing is on. */
export interface StepTracer {
  run(t: Task, s: StepSpan, fn: () => Promise<Outcome>): Promise<Outcome>;
  shutdown(): Promise<void>;
  /** Spans the OTLP exporter could not deliver. */
  readonly dropped: number;
}

function sampler(sdk: typeof import("@opentelemetry/sdk-trace"), env: Env): import("@opentelemetry/sdk-trace").Sampler {
  const name = (env.OTEL_TRACES_SAMPLER ?? "parentbased_always_on").trim().toLowerCase();
  const ratio = Number(env.OTEL_TRACES_SAMPLER_ARG ?? "1");
  const root =
    name.endsWith("always_off") ? new sdk.AlwaysOffSampler()
    : name.endsWith("traceidratio") ? new sdk.TraceIdRatioBasedSampler(Number.isFinite(ratio) ? ratio : 1)
    : new sdk.AlwaysOnSampler();
  return name.startsWith("parentbased") ? new sdk.ParentBasedSampler({ root }) : root;
}

function resourceAttributes(env: Env): Record<string, string> {
  const attrs: Record<string, string> = { "service.name": "wiggle-worker-ts" };
  for (const pair of (env.OTEL_RESOURCE_ATTRIBUTES ?? "").split(",")) {
    const at = pair.indexOf("=");
    if (at > 0) {
      attrs[decodeURIComponent(pair.slice(0, at).trim())] = decodeURIComponent(pair.slice(at + 1).trim());
    }
  }
  if ((env.OTEL_SERVICE_NAME ?? "") !== "") {
    attrs["service.name"] = env.OTEL_SERVICE_NAME as string;
  }
  return attrs;
}

/** The worker's tracer from the OTEL_* variables; null (logged) when the packages are missing. */
export async function loadTracer(log: Logger, env: Env = process.env): Promise<StepTracer | null> {
  let api: typeof import("@opentelemetry/api");
  let sdk: typeof import("@opentelemetry/sdk-trace");
  let resources: typeof import("@opentelemetry/resources");
  let otlp: typeof import("@opentelemetry/exporter-trace-otlp-grpc");
  try {
    api = await import("@opentelemetry/api");
    sdk = await import("@opentelemetry/sdk-trace");
    resources = await import("@opentelemetry/resources");
    otlp = await import("@opentelemetry/exporter-trace-otlp-grpc");
  } catch (e) {
    log.warn("tracing off: install @opentelemetry/api, @opentelemetry/sdk-trace, @opentelemetry/resources and @opentelemetry/exporter-trace-otlp-grpc", { err: String(e) });
    return null;
  }
  // The span id the next span is started for; set just before startSpan, which is synchronous.
  let wanted = "";
  const random = new sdk.RandomIdGenerator();
  const idGenerator = {
    generateTraceId: (): string => random.generateTraceId(),
    generateSpanId: (): string => {
      const id = wanted;
      wanted = "";
      return id !== "" ? id : random.generateSpanId();
    },
  };
  const inner = new otlp.OTLPTraceExporter();
  let dropped = 0;
  const exporter: import("@opentelemetry/sdk-trace").SpanExporter = {
    export(spans, done) {
      inner.export(spans, (result) => {
        if (result.code !== 0) {
          if (dropped === 0) {
            log.warn("spans not delivered to the OTLP endpoint (counted, not retried)", { err: String(result.error) });
          }
          dropped += spans.length;
        }
        done(result);
      });
    },
    shutdown: () => inner.shutdown(),
    forceFlush: () => inner.forceFlush(),
  };
  const delay = Number(env.OTEL_BSP_SCHEDULE_DELAY ?? "5000");
  const provider = new sdk.TracerProvider({
    resource: resources.resourceFromAttributes(resourceAttributes(env)),
    idGenerator,
    sampler: sampler(sdk, env),
    spanProcessors: [new sdk.BatchSpanProcessor({ exporter, scheduledDelayMillis: Number.isFinite(delay) ? delay : 5000 })],
  });
  const tracer = provider.getTracer("wiggle-typescript");
  return {
    get dropped() {
      return dropped;
    },
    async run(t, s, fn) {
      const trace = parseTraceparent(t.traceparent) ?? deriveTrace(t.instanceId, "");
      const state = t.tracestate !== "" ? api.createTraceState(t.tracestate) : undefined;
      const remote = (spanId: string): import("@opentelemetry/api").SpanContext => ({
        traceId: trace.traceId,
        spanId,
        traceFlags: trace.flags,
        isRemote: true,
        ...(state !== undefined ? { traceState: state } : {}),
      });
      const links = [];
      if (s.attempt > 1) {
        links.push({ context: remote(stepSpanId(t.instanceId, t.taskId, s.nodeId, s.attempt - 1, s.loops)) });
      }
      if (s.previous !== "") {
        links.push({ context: remote(s.previous) });
      }
      const parent = api.trace.setSpanContext(api.ROOT_CONTEXT, remote(instanceSpanId(t.instanceId)));
      wanted = stepSpanId(t.instanceId, t.taskId, s.nodeId, s.attempt, s.loops);
      const span = tracer.startSpan(
        `step ${s.activity}`,
        {
          kind: api.SpanKind.CONSUMER,
          links,
          attributes: {
            "wiggle.instance.id": t.instanceId,
            "wiggle.flow.name": t.flow,
            "wiggle.flow.version": t.version,
            "wiggle.node.id": s.nodeId,
            "wiggle.activity": s.activity,
            "wiggle.step.attempt": s.attempt,
            "wiggle.execution.mode": s.mode,
            "wiggle.queue": t.queue,
            "wiggle.task.id": t.taskId,
            "wiggle.run.position": s.position,
          },
        },
        parent,
      );
      wanted = "";
      try {
        const out = await api.context.with(api.trace.setSpan(parent, span), fn);
        if (out.kind === "failure") {
          const f = out.failure;
          span.setAttributes({
            "wiggle.step.outcome": "failed",
            "error.type": f.errorType !== "" ? f.errorType : "Error",
            "wiggle.step.non_retryable": f.nonRetryable,
          });
          span.setStatus({ code: api.SpanStatusCode.ERROR, message: f.message });
          span.addEvent("exception", { "exception.type": f.errorType, "exception.message": f.message });
        } else if (out.kind === "predicate") {
          span.setAttribute("wiggle.step.outcome", out.value ? "true" : "false");
        } else {
          span.setAttribute("wiggle.step.outcome", "completed");
        }
        return out;
      } finally {
        span.end();
      }
    },
    async shutdown() {
      // An unreachable collector never holds a stopping worker: two seconds at most.
      await Promise.race([provider.shutdown(), new Promise((resolve) => setTimeout(resolve, 2000).unref())]);
    },
  };
}
