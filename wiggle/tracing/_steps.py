"""A worker's step attempt spans (Python SDK): one per attempt, with the derived span id.

The span is the one the task's traceparent names (or, from a server that sends none, the one
derived from the task), a child of its instance span; a retry links to the attempt before it,
a chained step of a local run to the step before it (docs/observability.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from wiggle.tracecontext import (
    TraceContext,
    derive,
    instance_span_id,
    parse_traceparent,
    parse_tracestate,
    step_span_id,
)
from wiggle.tracing._attributes import outcome_attributes, step_attributes
from wiggle.tracing._sdk import Sdk, remote_context

__all__ = ["StepTracer"]


class StepTracer:
    """Wraps each step's handler call in its span (Worker: when tracing is on)."""

    def __init__(self, sdk: Sdk) -> None:
        self.sdk = sdk

    def run(
        self,
        task: Any,  # a wiggle_pb2.Task
        *,
        node_id: str,
        activity: str,
        attempt: int,
        loop_counts: Mapping[str, int],
        mode: str,
        position: int,
        previous: str,
        call: Callable[[], Any],
    ) -> tuple[Any, str]:
        """Run `call` (the handler) inside the step's span; returns its outcome and the span id.
        `previous`: the span id of the step before it in this local run ("" for the first)."""
        given = parse_traceparent(task.traceparent)
        trace_of = given if given is not None else derive(task.instance_id, "")
        parent = TraceContext(trace_of.trace_id, instance_span_id(task.instance_id), trace_of.flags)
        span_id = step_span_id(task.instance_id, task.task_id, node_id, attempt, loop_counts)
        state = parse_tracestate(task.tracestate)
        links = []
        if attempt > 1:
            before = step_span_id(task.instance_id, task.task_id, node_id, attempt - 1, loop_counts)
            links.append(remote_context(TraceContext(trace_of.trace_id, before, trace_of.flags)))
        if previous:
            links.append(remote_context(TraceContext(trace_of.trace_id, previous, trace_of.flags)))
        span = self.sdk.start(
            f"step {activity}",
            span_id=span_id,
            parent=remote_context(parent, state),
            attributes=step_attributes(
                instance_id=task.instance_id,
                flow=task.flow,
                version=task.version,
                node_id=node_id,
                activity=activity,
                attempt=attempt,
                mode=mode,
                queue=task.queue,
                task_id=task.task_id,
                position=position,
            ),
            links=links,
            kind=trace.SpanKind.CONSUMER,
        )
        try:
            with self.sdk.current(span):
                outcome = call()
            failure = getattr(outcome, "failure", None)
            span.set_attributes(
                outcome_attributes(
                    failed=failure is not None,
                    predicate=getattr(outcome, "value", None)
                    if isinstance(getattr(outcome, "value", None), bool)
                    else getattr(outcome, "predicate", None),
                    error_type=getattr(failure, "error_type", ""),
                    non_retryable=getattr(failure, "non_retryable", False),
                )
            )
            if failure is not None:
                span.set_status(Status(StatusCode.ERROR, failure.message[:1000]))
                span.add_event(
                    "exception",
                    {"exception.type": failure.error_type, "exception.message": failure.message},
                )
            return outcome, span_id
        finally:
            span.end()
