"""Between wire messages and the engine's records. JSON bytes are decoded here, once.

Enums are set by name: the engine's StrEnums carry the proto's enum names, and protobuf
constructors accept names.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import orjson

from wiggle._limits import depth_problem, quote, too_deep
from wiggle._proto.wiggle.v1 import wiggle_pb2 as pb
from wiggle.engine import (
    AdvanceResult,
    DefinitionSummary,
    EagerRequest,
    EventView,
    Incident,
    InstanceStatus,
    InstanceView,
    NodeCount,
    QueueGrant,
    QueueStats,
    Report,
    ReportKind,
    StepFailure,
    StepOutcome,
    TaskActivation,
    TokenView,
    WorkerSeen,
)
from wiggle.errors import InvalidRequest, PayloadTooLarge, WiggleError
from wiggle.tracecontext import derive, format_traceparent, step_span_id
from wiggle.wire import status_for

__all__ = [
    "ResultRefused",
    "answer_to_pb",
    "decode_json",
    "decode_result",
    "definition_to_pb",
    "error_answer_to_pb",
    "failure_from_pb",
    "incident_to_pb",
    "instance_to_pb",
    "node_count_to_pb",
    "outcome_from_pb",
    "outcomes_from_pb",
    "queue_to_pb",
    "task_to_pb",
    "worker_to_pb",
]


class TooDeep(InvalidRequest):
    """A JSON value nested deeper than the depth limit."""


def decode_json(data: bytes, what: str, limit: int) -> Any:
    """Decode a JSON field; empty means null. Oversized, too deep or malformed input is refused
    (PayloadTooLarge, InvalidRequest naming the depth limit, InvalidRequest)."""
    if len(data) > limit:
        raise PayloadTooLarge(f"{what} is {len(data)} bytes; the limit is {limit} bytes")
    if not data:
        return None
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if "depth" in str(exc):  # deeper than the decoder's own limit (far above ours)
            raise TooDeep(too_deep(what)) from None
        raise InvalidRequest(f"{what} is not valid JSON: {exc}") from None
    problem = depth_problem(what, value, data)
    if problem is not None:
        raise TooDeep(problem)
    return value


class ResultRefused(WiggleError):
    """A step result over the payload limit or the depth limit: not an error of the request,
    but a failure of the step that produced it (non-retryable: it would produce it again)."""

    def failure(self) -> StepFailure:
        return StepFailure(str(self), non_retryable=True, error_type="ResultRefused")


def decode_result(data: bytes, what: str, limit: int) -> Any:
    """Decode a step result; ResultRefused when it breaks the payload or the depth limit."""
    if len(data) > limit:
        raise ResultRefused(
            f"{what} is {len(data)} bytes of JSON; the server's limit (max_payload_bytes) is "
            f"{limit} bytes"
        )
    try:
        return decode_json(data, what, limit)
    except TooDeep as exc:
        raise ResultRefused(str(exc)) from None


def encode_json(value: Any) -> bytes:
    return orjson.dumps(value)


def failure_from_pb(msg: pb.StepFailure) -> StepFailure:
    return StepFailure(msg.message, msg.non_retryable, msg.error_type)


def outcome_from_pb(msg: pb.StepResult, limit: int) -> StepOutcome:
    """One reported step; a result that breaks a limit becomes the step's failure."""
    which = msg.WhichOneof("outcome")
    if which == "context":
        what = "the step's result"
        try:
            return StepOutcome(msg.node_id, context=decode_result(msg.context, what, limit))
        except ResultRefused as exc:
            return StepOutcome(msg.node_id, failure=exc.failure())
    if which == "predicate":
        return StepOutcome(msg.node_id, predicate=msg.predicate)
    if which == "failure":
        return StepOutcome(msg.node_id, failure=failure_from_pb(msg.failure))
    raise InvalidRequest(
        f"step {quote(msg.node_id)} carries no outcome (context, predicate or failure)"
    )


def outcomes_from_pb(steps: Sequence[pb.StepResult], limit: int) -> list[StepOutcome]:
    """A batch of reported steps; it ends at the first failure (a refused result included),
    since nothing after a failed step can have run on its result."""
    out: list[StepOutcome] = []
    for msg in steps:
        outcome = outcome_from_pb(msg, limit)
        out.append(outcome)
        if outcome.failure is not None and msg.WhichOneof("outcome") == "context":
            break
    return out


def task_to_pb(task: TaskActivation, limits: tuple[int, int] = (0, 0)) -> pb.Task:
    """The wire task; `limits`: the server's (max payload, max request) bytes."""
    return pb.Task(
        task_id=task.task_id,
        lease=task.lease,
        lease_expires_at_ms=task.lease_expires_at_ms,
        instance_id=task.instance_id,
        flow=task.flow,
        version=task.version,
        node_id=task.node_id,
        activity=task.activity,
        queue=task.queue,
        attempt=task.attempt,
        input=encode_json(task.input),
        execution_mode=str(task.execution_mode),
        loop_counts=encode_json(dict(task.loop_counts)),
        timeout_ms=task.timeout_ms,
        server_now_ms=task.server_now_ms,
        max_payload_bytes=limits[0],
        max_request_bytes=limits[1],
        **_trace_fields(task),
    )


def _trace_fields(task: TaskActivation) -> dict[str, str]:
    """The task's step attempt span context, when the engine gave the task its trace."""
    if not task.root_id:
        return {}
    trace = derive(task.root_id, task.traceparent)
    span = step_span_id(
        task.instance_id, task.task_id, task.node_id, task.attempt, task.loop_counts
    )
    return {
        "traceparent": format_traceparent(trace.trace_id, span, trace.flags),
        "tracestate": task.tracestate,
    }


def _token_to_pb(token: TokenView) -> pb.Token:
    return pb.Token(
        token_id=token.token_id,
        node_id=token.node_id,
        state=str(token.state),
        attempt=token.attempt,
        lease_owner=token.lease_owner,
        lease_expires_at_ms=token.lease_expires_at_ms,
        wake_at_ms=token.wake_at_ms,
        branch=token.branch,
        context=encode_json(token.context),
        queue=token.queue,
        activity=token.activity,
        wait_kind=token.wait_kind,
        child_instance_id=token.child_instance_id,
        ready_at_ms=token.ready_at_ms,
        parent_token_id=token.parent_token_id,
        explanation=token.explanation,
    )


def _event_to_pb(event: EventView) -> pb.Event:
    return pb.Event(
        seq=event.seq,
        at_ms=event.at_ms,
        kind=event.kind,
        node_id=event.node_id,
        attempt=event.attempt,
        detail=b"" if event.detail is None else encode_json(event.detail),
    )


def instance_to_pb(view: InstanceView, *, full: bool = True) -> pb.Instance:
    msg = pb.Instance(
        instance_id=view.instance_id,
        flow=view.flow,
        version=view.version,
        status=str(view.status),
        context=encode_json(view.context),
        reason=view.reason,
        execution_mode=str(view.execution_mode),
        parent_instance_id=view.parent_instance_id,
        created_at_ms=view.created_at_ms,
        updated_at_ms=view.updated_at_ms,
        current_node=view.current_node,  # a listing names where a running instance is, too
        started_by=view.started_by,
        trace_id=view.trace_id,
    )
    if view.search:
        msg.search = encode_json(view.search)
    if view.step_inputs:
        msg.step_inputs = encode_json(view.step_inputs)
    if view.input is not None or (full and view.status is InstanceStatus.RUNNING):
        msg.input = encode_json(view.input)
    if full:
        msg.tokens.extend(_token_to_pb(t) for t in view.tokens)
        msg.events.extend(_event_to_pb(e) for e in view.events)
        msg.child_instance_ids.extend(view.child_instance_ids)
    return msg


def definition_to_pb(d: DefinitionSummary) -> pb.DefinitionSummary:
    return pb.DefinitionSummary(
        name=d.name,
        version=d.version,
        registered_at_ms=d.registered_at_ms,
        execution_mode=str(d.execution_mode),
        instance_counts=d.instance_counts,
    )


def queue_to_pb(q: QueueStats) -> pb.QueueInfo:
    return pb.QueueInfo(
        queue=q.queue, ready=q.ready, oldest_ready_at_ms=q.oldest_ready_at_ms, leased=q.leased
    )


def node_count_to_pb(c: NodeCount) -> pb.NodeCount:
    return pb.NodeCount(node_id=c.node_id, state=c.state, instances=c.instances)


def incident_to_pb(i: Incident) -> pb.Incident:
    return pb.Incident(
        flow=i.flow,
        node_id=i.node_id,
        reason=i.reason,
        instances=i.instances,
        first_failed_at_ms=i.first_failed_at_ms,
        last_failed_at_ms=i.last_failed_at_ms,
        instance_ids=list(i.instance_ids),
    )


def worker_to_pb(w: WorkerSeen) -> pb.WorkerInfo:
    return pb.WorkerInfo(
        worker_id=w.worker_id,
        queues=list(w.queues),
        activities=list(w.activities),
        slots=w.slots,
        sdk=w.sdk,
        first_seen_ms=w.first_seen_ms,
        last_poll_ms=w.last_poll_ms,
    )


ReportMessage = (
    pb.CompleteTaskRequest | pb.FailTaskRequest | pb.AdvanceRunRequest | pb.ReleaseTaskRequest
)


def report_from_pb(
    msg: ReportMessage, limit: int, *, allow_next: bool = True, grant: QueueGrant | None = None
) -> Report:
    """The engine's Report for a report message; InvalidRequest / PayloadTooLarge when its
    JSON is bad. `allow_next`: honour CompleteTask's `next` (not while the server stops).
    `grant`: the queues the caller's credential is limited to, for the engine to check."""
    report = _report_of(msg, limit, allow_next)
    return report if grant is None else replace(report, grant=grant)


def _report_of(msg: ReportMessage, limit: int, allow_next: bool) -> Report:
    if isinstance(msg, pb.CompleteTaskRequest):
        try:
            result = decode_result(msg.result, f"the result of step {quote(msg.task_id)}", limit)
        except ResultRefused as exc:
            # Not a bad request but a failed step: it fails, non-retryably (it would return the
            # same result again), rather than the report being refused until the lease runs out.
            return Report(ReportKind.FAIL, msg.task_id, msg.lease, msg.seq, failure=exc.failure())
        nxt = None
        if allow_next and msg.HasField("next") and msg.next.worker_id:
            nxt = eager_from_pb(msg.next)
        return Report(ReportKind.COMPLETE, msg.task_id, msg.lease, msg.seq, result=result, next=nxt)
    if isinstance(msg, pb.FailTaskRequest):
        failure = failure_from_pb(msg.failure)
        return Report(ReportKind.FAIL, msg.task_id, msg.lease, msg.seq, failure=failure)
    if isinstance(msg, pb.ReleaseTaskRequest):
        reason = msg.reason or "released"
        return Report(ReportKind.RELEASE, msg.task_id, msg.lease, msg.seq, reason=reason)
    steps = tuple(outcomes_from_pb(msg.steps, limit))
    return Report(
        ReportKind.ADVANCE,
        msg.task_id,
        msg.lease,
        msg.seq,
        steps=steps,
        final=msg.final,
        reason=msg.handback_reason,
    )


def eager_from_pb(msg: pb.EagerDispatch) -> EagerRequest:
    return EagerRequest(msg.worker_id, tuple(msg.queues) or ("default",), tuple(msg.activities))


def answer_to_pb(
    kind: ReportKind, answer: AdvanceResult, limits: tuple[int, int]
) -> pb.TaskReportResponse | pb.AdvanceRunResponse:
    """The wire answer to a report of `kind`."""
    if kind is ReportKind.ADVANCE:
        return pb.AdvanceRunResponse(
            instance_status=str(answer.instance_status),
            lease_expires_at_ms=answer.lease_expires_at_ms,
            keep_going=answer.keep_going,
            server_now_ms=answer.server_now_ms,
        )
    response = pb.TaskReportResponse(instance_status=str(answer.instance_status))
    if answer.next_task is not None:
        response.next_task.CopyFrom(task_to_pb(answer.next_task, limits))
    return response


def error_answer_to_pb(exc: WiggleError) -> pb.TaskReportAnswer:
    """A batched report's refusal: the status and error code its own RPC would have failed with."""
    code, reason = status_for(exc)
    message = str(exc) or type(exc).__name__
    return pb.TaskReportAnswer(
        error=pb.ReportError(status_code=code.value[0], error_code=reason, message=message)
    )
