"""The OpenTelemetry SDK as Wiggle runs it: imported only when tracing is on.

One tracer provider per process (never the global one: an application's own stays its own),
configured by the OTEL_* variables as the SDK reads them (endpoint, headers, service name and
resource, sampler), with

- an id generator that hands out the derived ids (wiggle.tracecontext) a span is started for,
  and random ones otherwise;
- a batch processor, so a span costs the step no export;
- an exporter that counts what it could not deliver (`dropped`), so an unreachable collector
  shows in a metric and never in a step.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, TraceFlags, TraceState

from wiggle._version import __version__
from wiggle.tracecontext import TraceContext
from wiggle.tracing._logs import bound

__all__ = ["Sdk", "log_trace_ids", "remote_context"]

_log = logging.getLogger("wiggle.tracing")


class _DerivedIds(IdGenerator):
    """Random ids, except for the span (and trace) a caller asked for on this thread."""

    def __init__(self) -> None:
        self._random = RandomIdGenerator()
        self._next = threading.local()

    @contextlib.contextmanager
    def next(self, span_id: str, trace_id: str = "") -> Iterator[None]:
        self._next.span, self._next.trace = int(span_id, 16), int(trace_id or "0", 16)
        try:
            yield
        finally:
            self._next.span = self._next.trace = 0

    def generate_span_id(self) -> int:
        wanted = getattr(self._next, "span", 0)
        if wanted:
            self._next.span = 0
            return int(wanted)
        return self._random.generate_span_id()

    def generate_trace_id(self) -> int:
        wanted = getattr(self._next, "trace", 0)
        if wanted:
            self._next.trace = 0
            return int(wanted)
        return self._random.generate_trace_id()


class _Counting(SpanExporter):
    """The OTLP exporter, counting the spans it could not deliver."""

    def __init__(self, inner: SpanExporter, on_dropped: Callable[[int], None]) -> None:
        self._inner = inner
        self._on_dropped = on_dropped
        self.dropped = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self._inner.export(spans)
        except Exception:  # an exporter must never take its processor's thread down
            _log.debug("span export failed", exc_info=True)
            result = SpanExportResult.FAILURE
        if result is not SpanExportResult.SUCCESS:
            self.dropped += len(spans)
            self._on_dropped(len(spans))
        return result

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)


def _exporter() -> SpanExporter:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()  # endpoint, headers, TLS, timeout: the OTEL_EXPORTER_OTLP_* ones


_factory_installed = False


def log_trace_ids() -> None:
    """Log lines of Wiggle's loggers written while a span is current (a step's handler, what it
    logs included), or while a server's handler has bound the ids of what it handles
    (wiggle.tracing._logs), end with `trace_id=... span_id=...`. Installed once per process."""
    global _factory_installed
    if _factory_installed:
        return
    _factory_installed = True
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        if not record.name.startswith("wiggle"):
            return record
        ctx = trace.get_current_span().get_span_context()
        if ctx.is_valid:
            ids = f"trace_id={ctx.trace_id:032x} span_id={ctx.span_id:016x}"
        else:
            found = bound()
            if found is None:
                return record
            ids = f"trace_id={found[0]} span_id={found[1]}"
        record.msg, record.args = f"{record.getMessage()} {ids}", ()
        return record

    logging.setLogRecordFactory(factory)


def remote_context(ctx: TraceContext, tracestate: str = "") -> SpanContext:
    state = TraceState.from_header([tracestate]) if tracestate else TraceState()
    return SpanContext(
        int(ctx.trace_id, 16),
        int(ctx.span_id, 16),
        is_remote=True,
        trace_flags=TraceFlags(ctx.flags & 0xFF),
        trace_state=state,
    )


class Sdk:
    """The process's tracer provider and what Wiggle needs of it."""

    def __init__(
        self,
        component: str,
        *,
        on_dropped: Callable[[int], None] | None = None,
        exporter: SpanExporter | None = None,
    ) -> None:
        self.ids = _DerivedIds()
        # OTEL_SERVICE_NAME (and OTEL_RESOURCE_ATTRIBUTES) name the service; else wiggle-server
        # or wiggle-worker.
        named = os.environ.get("OTEL_SERVICE_NAME") or "service.name=" in os.environ.get(
            "OTEL_RESOURCE_ATTRIBUTES", ""
        )
        resource = Resource.create({} if named else {"service.name": f"wiggle-{component}"})
        self.provider = TracerProvider(resource=resource, id_generator=self.ids)
        self.exporter = _Counting(exporter or _exporter(), on_dropped or (lambda n: None))
        self.processor = BatchSpanProcessor(self.exporter)
        self.provider.add_span_processor(self.processor)
        self.tracer = self.provider.get_tracer("wiggle", __version__)
        log_trace_ids()

    def start(
        self,
        name: str,
        *,
        span_id: str,
        parent: SpanContext | None,
        trace_id: str = "",
        attributes: Mapping[str, Any] | None = None,
        links: Sequence[SpanContext] = (),
        start_ns: int | None = None,
        kind: trace.SpanKind = trace.SpanKind.INTERNAL,
    ) -> trace.Span:
        """A span with the derived `span_id`, under `parent` (a remote span context), or a root
        in `trace_id` when there is none."""
        ctx = trace.set_span_in_context(NonRecordingSpan(parent)) if parent else None
        with self.ids.next(span_id, "" if parent else trace_id):
            return self.tracer.start_span(
                name,
                context=ctx or otel_context.Context(),
                kind=kind,
                attributes=attributes,
                links=[Link(link) for link in links],
                start_time=start_ns,
            )

    @staticmethod
    @contextlib.contextmanager
    def current(span: trace.Span) -> Iterator[None]:
        """`span` as the current span (handlers' own spans nest under it, logs name it)."""
        token = otel_context.attach(trace.set_span_in_context(span))
        try:
            yield
        finally:
            otel_context.detach(token)

    def shutdown(self, timeout_s: float = 2.0) -> None:
        """Export what is buffered, waiting at most `timeout_s`: an unreachable collector
        never holds a stopping process."""
        done = threading.Thread(target=self.provider.shutdown, name="wiggle-otel-stop")
        done.daemon = True
        done.start()
        done.join(timeout_s)
