package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/wiggle-engine/wiggle/sdk/go/tracecontext"
	"github.com/wiggle-engine/wiggle/sdk/go/wigglepb"
)

// TracingEnabled says whether the standard OTEL_* variables turn tracing on: an OTLP endpoint
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or OTEL_TRACES_EXPORTER
// naming an exporter, unless OTEL_SDK_DISABLED is true or OTEL_TRACES_EXPORTER is none
// (docs/observability.md; the same rule in every SDK).
func TracingEnabled() bool {
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	exporter := strings.ToLower(strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER")))
	if exporter == "none" {
		return false
	}
	endpoint := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") + os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	return endpoint != "" || exporter != ""
}

// stepTracer makes one span per step attempt, with the span id the server derived for it.
type stepTracer struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	dropped  *atomic.Int64
}

type wantedSpan struct{}

// derivedIDs hands out the span id a step's context asks for, random ids otherwise.
type derivedIDs struct{}

func random(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func (derivedIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	var t trace.TraceID
	copy(t[:], random(16))
	return t, derivedIDs{}.NewSpanID(ctx, t)
}

func (derivedIDs) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if want, ok := ctx.Value(wantedSpan{}).(trace.SpanID); ok && want.IsValid() {
		return want
	}
	var s trace.SpanID
	copy(s[:], random(8))
	return s
}

// countingExporter counts the spans the OTLP exporter could not deliver.
type countingExporter struct {
	sdktrace.SpanExporter
	dropped *atomic.Int64
	log     *slog.Logger
}

func (e countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	if err != nil {
		if e.dropped.Add(int64(len(spans))) == int64(len(spans)) {
			e.log.Warn("spans not delivered to the OTLP endpoint (counted, not retried)", "err", err)
		}
	}
	return err
}

// newStepTracer builds the worker's tracer provider from the OTEL_* variables; nil when
// tracing is off or cannot start (logged).
func newStepTracer(log *slog.Logger) *stepTracer {
	if !TracingEnabled() {
		return nil
	}
	exp, err := otlptracegrpc.New(context.Background())
	if err != nil {
		log.Warn("tracing off: the OTLP exporter did not start", "err", err)
		return nil
	}
	res := resource.NewSchemaless(attribute.String("service.name", "wiggle-worker-go"))
	if env, err := resource.Merge(res, resource.Environment()); err == nil {
		res = env
	}
	dropped := &atomic.Int64{}
	provider := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(countingExporter{exp, dropped, log}),
		sdktrace.WithIDGenerator(derivedIDs{}),
		sdktrace.WithResource(res),
	)
	return &stepTracer{provider: provider, tracer: provider.Tracer("wiggle-go"), dropped: dropped}
}

func (st *stepTracer) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = st.provider.Shutdown(ctx) // an unreachable collector never holds a stopping worker
}

func spanID(hexID string) trace.SpanID {
	var s trace.SpanID
	b, _ := hex.DecodeString(hexID)
	copy(s[:], b)
	return s
}

func traceID(hexID string) trace.TraceID {
	var t trace.TraceID
	b, _ := hex.DecodeString(hexID)
	copy(t[:], b)
	return t
}

// stepSpan describes the step a span is for.
type stepSpan struct {
	node, activity, mode string
	attempt, position    int
	loops                map[string]int
	previous             string // the span id of the step before it in this local run
}

// run runs fn (the handler) inside the step attempt's span; the outcome and the span's id.
func (st *stepTracer) run(ctx context.Context, t *wigglepb.Task, s stepSpan, fn func(context.Context) outcome) (outcome, string) {
	given, ok := tracecontext.Parse(t.GetTraceparent())
	if !ok {
		given = tracecontext.Derive(t.GetInstanceId(), "")
	}
	tid := traceID(given.TraceID)
	flags := trace.TraceFlags(given.Flags)
	state, _ := trace.ParseTraceState(t.GetTracestate())
	parent := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: spanID(tracecontext.InstanceSpanID(t.GetInstanceId())),
		TraceFlags: flags, TraceState: state, Remote: true,
	})
	link := func(id string) trace.Link {
		return trace.Link{SpanContext: trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: tid, SpanID: spanID(id), TraceFlags: flags, Remote: true,
		})}
	}
	var links []trace.Link
	if s.attempt > 1 {
		links = append(links, link(tracecontext.StepSpanID(t.GetInstanceId(), t.GetTaskId(), s.node, s.attempt-1, s.loops)))
	}
	if s.previous != "" {
		links = append(links, link(s.previous))
	}
	id := tracecontext.StepSpanID(t.GetInstanceId(), t.GetTaskId(), s.node, s.attempt, s.loops)
	ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	ctx, span := st.tracer.Start(context.WithValue(ctx, wantedSpan{}, spanID(id)), "step "+s.activity,
		trace.WithSpanKind(trace.SpanKindConsumer), trace.WithLinks(links...),
		trace.WithAttributes(
			attribute.String("wiggle.instance.id", t.GetInstanceId()),
			attribute.String("wiggle.flow.name", t.GetFlow()),
			attribute.String("wiggle.flow.version", t.GetVersion()),
			attribute.String("wiggle.node.id", s.node),
			attribute.String("wiggle.activity", s.activity),
			attribute.Int("wiggle.step.attempt", s.attempt),
			attribute.String("wiggle.execution.mode", s.mode),
			attribute.String("wiggle.queue", t.GetQueue()),
			attribute.String("wiggle.task.id", t.GetTaskId()),
			attribute.Int("wiggle.run.position", s.position),
		))
	defer span.End()
	out := fn(context.WithValue(ctx, wantedSpan{}, trace.SpanID{})) // the handler's own spans get random ids
	switch {
	case out.failure != nil:
		span.SetAttributes(
			attribute.String("wiggle.step.outcome", "failed"),
			attribute.String("error.type", nonEmpty(out.failure.errorType, "Error")),
			attribute.Bool("wiggle.step.non_retryable", out.failure.nonRetryable),
		)
		span.SetStatus(otelcodes.Error, out.failure.message)
		span.AddEvent("exception", trace.WithAttributes(
			attribute.String("exception.type", out.failure.errorType),
			attribute.String("exception.message", out.failure.message),
		))
	case out.predicate != nil:
		span.SetAttributes(attribute.String("wiggle.step.outcome", map[bool]string{true: "true", false: "false"}[*out.predicate]))
	default:
		span.SetAttributes(attribute.String("wiggle.step.outcome", "completed"))
	}
	return out, id
}

func nonEmpty(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}

// loopsOf reads a task's loop counts (empty on anything unreadable).
func loopsOf(t *wigglepb.Task) map[string]int {
	m := map[string]int{}
	if len(t.GetLoopCounts()) > 0 {
		_ = json.Unmarshal(t.GetLoopCounts(), &m)
	}
	return m
}
