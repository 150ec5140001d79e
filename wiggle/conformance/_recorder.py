"""What the worker under test said to the server, recorded by the runner's own server.

A gRPC server interceptor sees every task the server hands out (PollTasks, an eager start,
CompleteTask's `next`) and every call the worker makes about a task: reports (CompleteTask,
FailTask, AdvanceRun, ReleaseTask) with their seq, steps, `final` and reason, and heartbeats. The
runner judges a worker's orchestration from this record (`_orchestration`): the trace file
only says which steps ran, this says how they were driven.

It also injects server-side faults a case asks for: a call answered with a status instead of
being served (an AdvanceRun UNIMPLEMENTED, a Heartbeat UNAVAILABLE), or served and then answered
UNAVAILABLE, as if the response had been lost on the way. A fault on ReportBatch hits the whole
batch: every report in it is refused, or applied with its answer lost. A PollTasks answer that
claimed tasks can be held back until the worker ends its polls (EndPolls) or gives up the call:
the moment a draining worker must not lose.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import grpc
import orjson

from wiggle._limits import bytes_may_nest_over, json_depth_over
from wiggle.wire import ERROR_CODE_KEY, REPORT_FIELDS, unbatched

__all__ = ["Call", "CancelSeen", "Delivery", "Recorder", "ServerFault", "StepSeen"]

_SERVICE = "/wiggle.v1.Wiggle/"
#: The longest a held PollTasks answer waits for the worker to end its polls.
_HOLD_S = 30.0
REPORTS = tuple(REPORT_FIELDS)
_WATCHED = frozenset(
    {
        *REPORTS,
        "ReportBatch",
        "Heartbeat",
        "PollTasks",
        "StartInstance",
        "EndPolls",
        "CancelInstance",
    }
)
_LEASED = frozenset({*REPORTS, "Heartbeat"})


@dataclass(frozen=True)
class StepSeen:
    """One StepResult of an AdvanceRun (or the one step of CompleteTask / FailTask)."""

    node_id: str
    kind: str  # "context", "predicate", "failure" or "none"
    predicate: bool | None = None
    context_bytes: int = 0
    context_bool: bool | None = None  # a `context` holding JSON true or false: that value
    entry_bytes: int = 0  # what the step adds to the encoded request
    too_deep: bool = False  # a `context` nested deeper than the JSON depth limit


@dataclass(frozen=True)
class Delivery:
    """A task the server handed out: one lease on one step."""

    task_id: str
    lease: str
    instance_id: str
    flow: str
    version: str
    node_id: str
    attempt: int
    mode: str
    loop_counts: bytes
    via: str  # "poll", "eager" or "next"
    queues: tuple[str, ...]  # the queues of the worker it went to
    max_request_bytes: int
    max_payload_bytes: int
    timeout_ms: int
    at: float  # time.monotonic() when it was handed out


@dataclass(frozen=True)
class Call:
    """One call about a task, as the server received and answered it."""

    order: int
    at: float  # time.monotonic() when it was answered
    rpc: str
    task_id: str
    lease: str
    seq: int = 0
    steps: tuple[StepSeen, ...] = ()
    final: bool = False
    reason: str = ""
    node_id: str = ""  # a Heartbeat's node_id
    code: str = "OK"  # the status it was answered with
    error_code: str = ""  # the wiggle-error-code trailer
    keep_going: bool = False
    instance_status: str = ""
    injected: str = ""  # a fault the recorder applied: "refused" or "lost"
    request_bytes: int = 0
    batched: bool = False  # it travelled in a ReportBatch

    @property
    def ok(self) -> bool:
        """The server applied it (a lost response was applied too)."""
        return self.code == "OK" or self.injected == "lost"


@dataclass(frozen=True)
class CancelSeen:
    """One CancelInstance call as the server served it (the client sends a cancel again after
    an UNAVAILABLE answer: each attempt is one of these)."""

    instance_id: str
    arrived: float  # time.monotonic() when the server began serving it
    code: str  # the status it was answered with


@dataclass(frozen=True)
class ServerFault:
    """Answer `rpc` with `status` instead of serving it (`lose_response` False), or serve it
    and then answer UNAVAILABLE (True); `hold` (PollTasks): serve it, and hold back an answer
    that claimed tasks until the worker calls EndPolls or gives up the call; `times` 0: every
    call, else that many."""

    rpc: str
    status: str = "UNAVAILABLE"
    lose_response: bool = False
    times: int = 0
    hold: bool = False


@dataclass
class _Armed:
    fault: ServerFault
    left: int  # -1: unlimited


if TYPE_CHECKING:
    _Interceptor = grpc.ServerInterceptor[Any, Any]
else:  # generic only in the type stubs
    _Interceptor = grpc.ServerInterceptor


def _steps_of(method: str, request: Any) -> tuple[StepSeen, ...]:
    """An AdvanceRun's steps; a CompleteTask's result as one step (its node left blank)."""
    if method == "CompleteTask":
        raw = bytes(request.result).strip()
        return (StepSeen("", "context", context_bytes=len(raw), too_deep=_too_deep(raw)),)
    if method == "AdvanceRun":
        out = []
        for s in request.steps:
            which = s.WhichOneof("outcome") or "none"
            raw = bytes(s.context).strip() if which == "context" else b""
            out.append(
                StepSeen(
                    s.node_id,
                    which,
                    predicate=s.predicate if which == "predicate" else None,
                    context_bytes=len(raw),
                    context_bool={b"true": True, b"false": False}.get(raw),
                    entry_bytes=_entry_bytes(s.ByteSize()),
                    too_deep=_too_deep(raw),
                )
            )
        return tuple(out)
    return ()


def _too_deep(raw: bytes) -> bool:
    """Whether encoded JSON nests deeper than the depth limit (not JSON at all: False; the
    server says what is wrong with that)."""
    if not bytes_may_nest_over(raw):
        return False
    try:
        return json_depth_over(orjson.loads(raw))
    except orjson.JSONDecodeError:  # orjson's own nesting limit (1024) included
        return raw.count(b"[") + raw.count(b"{") > 1024


def _leases_of(method: str, request: Any) -> list[str]:
    """The leases a call is about (a ReportBatch: each of its reports')."""
    if method == "ReportBatch":
        return [report.lease for _, report in filter(None, map(unbatched, request.reports))]
    lease = getattr(request, "lease", "")
    return [lease] if method in _LEASED and lease else []


def _entry_bytes(size: int) -> int:
    """A repeated message field's cost: its tag, its length as a varint, the message."""
    varint = 1
    while size >= 0x80 << (7 * (varint - 1)):
        varint += 1
    return 1 + varint + size


class Recorder(_Interceptor):
    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._open_polls: dict[tuple[str, ...], int] = {}  # by the polling worker's queues
        self._polls_seen: dict[tuple[str, ...], int] = {}  # every poll ever begun, by queues
        self._calls: list[Call] = []
        self._cancels: list[CancelSeen] = []
        self._deliveries: dict[str, Delivery] = {}  # by lease
        self._faults: list[_Armed] = []
        self._serving: dict[str, int] = {}  # lease -> calls about it being served right now
        self._ending: set[str] = set()  # workers that called EndPolls since the faults were armed
        self._held = 0  # poll answers held back since the faults were armed

    # -- what the runner asks --------------------------------------------------------------

    def arm(self, faults: Sequence[ServerFault]) -> None:
        """Inject these faults from now on (replacing any armed before)."""
        with self._lock:
            self._faults = [_Armed(f, f.times or -1) for f in faults]
            self._ending.clear()
            self._held = 0

    def disarm(self) -> None:
        self.arm(())

    def deliveries(self, instance_ids: set[str]) -> list[Delivery]:
        with self._lock:
            return [d for d in self._deliveries.values() if d.instance_id in instance_ids]

    def calls(self, leases: set[str]) -> list[Call]:
        with self._lock:
            return [c for c in self._calls if c.lease in leases]

    def cancels(self, instance_id: str) -> list[CancelSeen]:
        """The CancelInstance calls about `instance_id` answered so far, in the order they
        arrived."""
        with self._lock:
            return sorted(
                (c for c in self._cancels if c.instance_id == instance_id), key=lambda c: c.arrived
            )

    def recorded(self) -> int:
        """How many calls have been recorded so far (for `wait_more`)."""
        with self._lock:
            return len(self._calls)

    def wait_more(self, seen: int, timeout_s: float) -> None:
        """Wait until more than `seen` calls are recorded, or `timeout_s` passes."""
        with self._lock:
            self._lock.wait_for(lambda: len(self._calls) > seen, timeout_s)

    def wait_recorded(self, leases: set[str], timeout_s: float) -> bool:
        """Wait until no call about these leases is still being served. The server applies a
        report before this records it: an instance can be seen finished while the report that
        finished it is not written down yet."""
        with self._lock:
            return self._lock.wait_for(lambda: not leases & self._serving.keys(), timeout_s)

    def wait_resent(self, leases: set[str], timeout_s: float) -> bool:
        """Wait until every report about these leases whose answer was lost has a later report
        (its resend). A lost final report finished the instance already: its resend, after a
        back-off, may come after the run looks over."""

        def resent() -> bool:
            calls = [c for c in self._calls if c.lease in leases and c.rpc in REPORTS]
            return all(
                any(later.lease == c.lease for later in calls[i + 1 :])
                for i, c in enumerate(calls)
                if c.injected == "lost"
            )

        with self._lock:
            return self._lock.wait_for(resent, timeout_s)

    def wait_polls_ended(self, queues: tuple[str, ...] | None, timeout_s: float) -> bool:
        """Wait until the server has no PollTasks call open for a worker serving `queues` (None:
        for anyone). A stopped worker's poll may still be parked in the server, which would claim
        a new task for a caller that is gone."""
        with self._lock:
            return self._lock.wait_for(
                lambda: (
                    not any(n for q, n in self._open_polls.items() if queues is None or q == queues)
                ),
                timeout_s,
            )

    def polls_seen(self, queues: tuple[str, ...]) -> int:
        """How many polls a worker serving `queues` has begun so far."""
        with self._lock:
            return self._polls_seen.get(queues, 0)

    def wait_polling(self, queues: tuple[str, ...], since: int, timeout_s: float) -> bool:
        """Wait until a worker serving `queues` begins a poll after `since` polls were seen: a
        process just started is serving only once it polls, and a slow-starting runtime (a JVM
        takes seconds) would otherwise spend a case's time budget booting."""
        with self._lock:
            return self._lock.wait_for(lambda: self._polls_seen.get(queues, 0) > since, timeout_s)

    def polls_held(self) -> int:
        """How many poll answers a `hold` fault held back since the faults were armed."""
        with self._lock:
            return self._held

    def refused_unimplemented(self) -> bool:
        """Whether any AdvanceRun was answered UNIMPLEMENTED (the worker then falls back)."""
        with self._lock:
            return any(c.rpc == "AdvanceRun" and c.code == "UNIMPLEMENTED" for c in self._calls)

    # -- the interceptor -------------------------------------------------------------------

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler[Any, Any] | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = continuation(handler_call_details)
        full: str = handler_call_details.method
        method = full.removeprefix(_SERVICE)
        if handler is None or not full.startswith(_SERVICE) or method not in _WATCHED:
            return handler
        inner = handler.unary_unary
        assert inner is not None

        def serve(request: Any, context: grpc.ServicerContext) -> Any:
            if method == "PollTasks":
                return self._poll(inner, request, context)
            if method == "CancelInstance":
                return self._cancel(inner, request, context)
            if method == "EndPolls":
                with self._lock:
                    self._ending.add(request.worker_id)
                    self._lock.notify_all()
            leases = _leases_of(method, request)
            self._enter(leases)
            try:
                if method == "ReportBatch":
                    return self._batch(inner, request, context)
                return self._serve(method, inner, request, context)
            finally:
                self._leave(leases)

        return grpc.unary_unary_rpc_method_handler(
            serve,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )

    def _serve(self, method: str, inner: Any, request: Any, context: grpc.ServicerContext) -> Any:
        """Serve one call (or inject its fault) and record it."""
        fault = self._take(method)
        if fault is not None and not fault.lose_response:
            self._record(method, request, None, context, injected="refused", status=fault.status)
            context.abort(grpc.StatusCode[fault.status], f"conformance fault: {method} refused")
        try:
            response = inner(request, context)
        except BaseException:
            self._record(method, request, None, context)
            raise
        if fault is not None:
            self._record(method, request, response, context, injected="lost")
            context.abort(grpc.StatusCode.UNAVAILABLE, "conformance fault: response lost")
        self._record(method, request, response, context)
        return response

    def _cancel(self, inner: Any, request: Any, context: grpc.ServicerContext) -> Any:
        """Serve a cancel and note when it reached the server: a cancel refuses the reports
        applied after it, so whether it came too late for its moment is judged by this time
        (_spoiled), not by when the runner sent it (a loaded client or a retried attempt may
        deliver it seconds later). Recorded before the answer goes out, so the runner finds it
        once its call returns."""
        arrived = time.monotonic()
        code = "OK"
        try:
            return inner(request, context)
        except BaseException:
            code = _code_name(context)
            raise
        finally:
            with self._lock:
                self._cancels.append(CancelSeen(request.instance_id, arrived, code))

    def _enter(self, leases: Sequence[str]) -> None:
        with self._lock:
            for lease in leases:
                self._serving[lease] = self._serving.get(lease, 0) + 1

    def _leave(self, leases: Sequence[str]) -> None:
        with self._lock:
            for lease in leases:
                self._serving[lease] -= 1
                if not self._serving[lease]:
                    del self._serving[lease]
            self._lock.notify_all()

    def _poll(self, inner: Any, request: Any, context: grpc.ServicerContext) -> Any:
        queues = tuple(request.queues)
        with self._lock:
            self._open_polls[queues] = self._open_polls.get(queues, 0) + 1
            self._polls_seen[queues] = self._polls_seen.get(queues, 0) + 1
            self._lock.notify_all()
        try:
            response = inner(request, context)
            self._record("PollTasks", request, response, context)
            if response.tasks and self._take("PollTasks") is not None:
                self._hold(request.worker_id, context)
            return response
        finally:
            with self._lock:
                self._open_polls[queues] -= 1
                self._lock.notify_all()

    def _batch(self, inner: Any, request: Any, context: grpc.ServicerContext) -> Any:
        """A ReportBatch is recorded as the reports it carries, each with its own answer.

        Faults on a report RPC are injected per report RPC: while any is armed, this server does
        not offer ReportBatch (UNIMPLEMENTED, as an older server would answer), so the worker
        sends each report alone and the fault reaches it. A fault on ReportBatch itself hits the
        whole call, as a transport fault would: every report in it refused, or applied with its
        answer lost."""
        with self._lock:
            armed = any(a.fault.rpc in REPORTS and a.left != 0 for a in self._faults)
        if armed:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "conformance: ReportBatch is off")
        carried = [c for c in map(unbatched, request.reports) if c is not None]
        fault = self._take("ReportBatch")
        if fault is not None and not fault.lose_response:
            for rpc, report in carried:
                self._record(
                    rpc,
                    report,
                    None,
                    context,
                    injected="refused",
                    status=fault.status,
                    batched=True,
                )
            context.abort(grpc.StatusCode[fault.status], "conformance fault: ReportBatch refused")
        response = inner(request, context)
        lost = "lost" if fault is not None else ""
        for item, answer in zip(request.reports, response.answers, strict=False):
            one = unbatched(item)
            if one is None:
                continue
            rpc, report = one
            got = answer.WhichOneof("answer")
            if got == "error":
                name = _CODES.get(answer.error.status_code, "UNKNOWN")
                self._record(
                    rpc,
                    report,
                    None,
                    context,
                    status=name,
                    error_code=answer.error.error_code,
                    batched=True,
                )
            else:
                self._record(
                    rpc, report, getattr(answer, got), context, injected=lost, batched=True
                )
        if fault is not None:
            context.abort(grpc.StatusCode.UNAVAILABLE, "conformance fault: response lost")
        return response

    def _hold(self, worker_id: str, context: grpc.ServicerContext) -> None:
        """Keep a poll's answer (tasks claimed, leases running) until the worker ends its polls
        or abandons the call. A worker that cancels its poll instead never reads it: those tasks
        stay leased to nobody until their leases expire."""
        give_up = time.monotonic() + _HOLD_S
        with self._lock:
            self._held += 1
            # A cancelled call notifies nobody: look at it every tenth of a second.
            while worker_id not in self._ending and context.is_active():
                if time.monotonic() > give_up:
                    break
                self._lock.wait(0.1)

    def _take(self, method: str) -> ServerFault | None:
        with self._lock:
            for armed in self._faults:
                if armed.fault.rpc == method and armed.left != 0:
                    if armed.left > 0:
                        armed.left -= 1
                    return armed.fault
        return None

    def _record(
        self,
        method: str,
        request: Any,
        response: Any,
        context: grpc.ServicerContext,
        *,
        injected: str = "",
        status: str = "",
        error_code: str = "",
        batched: bool = False,
    ) -> None:
        if method in ("PollTasks", "StartInstance", "CompleteTask") and response is not None:
            self._deliver(method, request, response)
        if method in ("PollTasks", "StartInstance", "EndPolls"):
            return
        code = status or ("OK" if response is not None else _code_name(context))
        for key, value in () if error_code or status else context.trailing_metadata() or ():
            if key == ERROR_CODE_KEY:
                error_code = value if isinstance(value, str) else value.decode()
        call = Call(
            order=0,
            at=time.monotonic(),
            rpc=method,
            task_id=request.task_id,
            lease=request.lease,
            seq=getattr(request, "seq", 0),
            steps=_steps_of(method, request),
            final=bool(getattr(request, "final", method != "AdvanceRun")),
            reason=getattr(request, "handback_reason", "") or getattr(request, "reason", ""),
            node_id=getattr(request, "node_id", "") if method == "Heartbeat" else "",
            code=code,
            error_code=error_code,
            keep_going=bool(getattr(response, "keep_going", False)),
            instance_status=_status_name(response),
            injected=injected,
            request_bytes=request.ByteSize(),
            batched=batched,
        )
        with self._lock:
            self._calls.append(_numbered(call, len(self._calls)))
            self._lock.notify_all()

    def _deliver(self, method: str, request: Any, response: Any) -> None:
        if method == "PollTasks":
            tasks, via, queues = list(response.tasks), "poll", tuple(request.queues)
        elif method == "StartInstance":
            has = response.HasField("eager_task")
            tasks, via, queues = [response.eager_task] if has else [], "eager", ()
            if has:
                queues = tuple(request.eager.queues)
        else:
            has = response.HasField("next_task")
            tasks, via = [response.next_task] if has else [], "next"
            queues = tuple(request.next.queues) if request.HasField("next") else ()
        with self._lock:
            for t in tasks:
                self._deliveries[t.lease] = Delivery(
                    task_id=t.task_id,
                    lease=t.lease,
                    instance_id=t.instance_id,
                    flow=t.flow,
                    version=t.version,
                    node_id=t.node_id,
                    attempt=t.attempt,
                    mode=_mode_name(t.execution_mode),
                    loop_counts=bytes(t.loop_counts),
                    via=via,
                    queues=queues or ("default",),
                    max_request_bytes=t.max_request_bytes,
                    max_payload_bytes=t.max_payload_bytes,
                    timeout_ms=t.timeout_ms,
                    at=time.monotonic(),
                )


_CODES = {code.value[0]: code.name for code in grpc.StatusCode}


def _code_name(context: grpc.ServicerContext) -> str:
    code = context.code()  # type: ignore[attr-defined]
    return code.name if isinstance(code, grpc.StatusCode) else "UNKNOWN"


def _status_name(response: Any) -> str:
    from wiggle._proto.wiggle.v1 import wiggle_pb2 as pb

    if response is None or not hasattr(response, "instance_status"):
        return ""
    return pb.InstanceStatus.Name(response.instance_status)


def _mode_name(mode: int) -> str:
    from wiggle._proto.wiggle.v1 import wiggle_pb2 as pb

    return pb.ExecutionMode.Name(mode)


def _numbered(call: Call, order: int) -> Call:
    return replace(call, order=order)
