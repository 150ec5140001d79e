"""The caller's trace context for a start: the current OpenTelemetry span's, read only when
the application has already loaded OpenTelemetry (so a client without it imports nothing)."""

from __future__ import annotations

import sys

from wiggle.tracecontext import format_traceparent

__all__ = ["current_trace_context"]


def current_trace_context() -> tuple[str, str]:
    """(traceparent, tracestate) of the current span; ("", "") when there is none."""
    if "opentelemetry.trace" not in sys.modules:
        return "", ""
    from opentelemetry import trace

    ctx = trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return "", ""
    parent = format_traceparent(f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}", int(ctx.trace_flags))
    return parent, ctx.trace_state.to_header()
