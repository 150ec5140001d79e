"""The Wiggle gRPC service: decode, call the engine, encode. No state of its own.

Handlers run on the gRPC server's thread pool and call the (blocking, thread-safe) engine
directly. Nothing here assumes this process is the only server over the database: every
decision that needs coordination (claims, leases, timers) is the engine's, inside the database.
"""

from __future__ import annotations

import logging
import threading
import time
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import grpc

from wiggle._proto.wiggle.v1 import wiggle_pb2 as pb
from wiggle._proto.wiggle.v1 import wiggle_pb2_grpc as pb_grpc
from wiggle._trouble import Trouble
from wiggle.engine import Engine, InstanceFilter, InstanceStatus, Report, ReportKind, WorkerNote
from wiggle.errors import InvalidRequest, PayloadTooLarge, StaleLease, Unavailable, WiggleError
from wiggle.filters import parse_filter
from wiggle.server._auth import CALLER, GRANT
from wiggle.server._calls import CallTracker, rpc_handler
from wiggle.server._convert import (
    ReportMessage,
    answer_to_pb,
    decode_json,
    definition_to_pb,
    eager_from_pb,
    error_answer_to_pb,
    incident_to_pb,
    instance_to_pb,
    node_count_to_pb,
    queue_to_pb,
    report_from_pb,
    task_to_pb,
    worker_to_pb,
)
from wiggle.server._edges import check_request
from wiggle.tracecontext import instance_span_id, parse_traceparent, parse_tracestate, trace_id_for
from wiggle.tracing._logs import Ids, bind
from wiggle.wire import unbatched

if TYPE_CHECKING:
    # Loaded with prometheus_client only when a server serves metrics.
    from wiggle.server._metrics import ServerMetrics

__all__ = ["CallTracker", "WiggleService", "rpc_handler"]

_log = logging.getLogger("wiggle.server")

Req = TypeVar("Req")
Resp = TypeVar("Resp")

#: PollTasks never hands out more than this many tasks in one response.
MAX_TASKS_PER_POLL = 256
#: A long poll waits in slices of at most this long, re-checking shutdown and the caller between
#: them; a new task ends the wait at once whatever the slice.
POLL_SLICE_S = 1.0
#: ListInstances answers at most this many instances a page (100 when the caller says nothing).
MAX_PAGE_SIZE = 1000
#: Workers whose last poll is this recent are listed when the caller does not say.
WORKERS_SEEN_WITHIN_MS = 30_000
#: Answer a long poll this long before the caller's deadline, so it gets a response, not an error.
DEADLINE_MARGIN_S = 0.2


_rpc = rpc_handler


def _status(status: InstanceStatus) -> str:
    return str(status)  # protobuf takes an enum's name


def _trace_context(traceparent: str, tracestate: str, ignored: list[str]) -> dict[str, str]:
    """A start's W3C trace context, normalised; a malformed or oversized one is ignored (said
    in `ignored`, for a debug line) and the instance's trace derived instead
    (docs/observability.md)."""
    if not traceparent:
        return {}
    found = parse_traceparent(traceparent)
    if found is None:
        ignored.append(f"a malformed or oversized traceparent {traceparent[:80]!r}")
        return {}
    state = parse_tracestate(tracestate)
    if tracestate and not state:
        ignored.append("a malformed or oversized tracestate")
    return {"traceparent": found.traceparent(), "tracestate": state}


def _start_ids(instance_id: str, traceparent: str) -> Ids | None:
    """The ids a start's log lines carry: its instance span's once the id is known, else the
    caller's span (a start without an id, before the instance exists), else none."""
    caller = parse_traceparent(traceparent) if traceparent else None
    if instance_id:
        trace = caller.trace_id if caller is not None else trace_id_for(instance_id)
        return trace, instance_span_id(instance_id)
    return (caller.trace_id, caller.span_id) if caller is not None else None


class WiggleService(pb_grpc.WiggleServicer):
    def __init__(
        self,
        engine: Engine,
        *,
        max_payload_bytes: int,
        max_poll_wait_s: float,
        max_waiting_polls: int,
        stopping: threading.Event,
        max_request_bytes: int = 0,
        metrics: ServerMetrics | None = None,
    ) -> None:
        self._engine = engine
        self._metrics = metrics
        self._limit = max_payload_bytes
        self._limits = (max_payload_bytes, max_request_bytes)
        # Open long polls by worker id, so EndPolls can end a draining worker's poll at once.
        self._polls: dict[str, set[_OpenPoll]] = {}
        self._polls_lock = threading.Lock()
        self._max_wait = max_poll_wait_s
        self._stopping = stopping
        self._max_waiting = max_waiting_polls
        self._waiting = threading.BoundedSemaphore(max_waiting_polls)
        self._noting = Trouble(
            _log,
            down="could not record polling workers ({why})",
            up="recording polling workers again after {seconds:.1f} s",
        )
        # Handlers still running: the engine must not be closed under one of them.
        self.calls = CallTracker(metrics)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no handler (of any service sharing `calls`) is running; False on timeout."""
        return self.calls.wait_idle(timeout)

    def _json(self, data: bytes, what: str) -> Any:
        return decode_json(data, what, self._limit)

    # -- definitions -----------------------------------------------------------------------

    @_rpc
    def RegisterDefinition(
        self, request: pb.RegisterDefinitionRequest, context: grpc.ServicerContext
    ) -> pb.RegisterDefinitionResponse:
        from wiggle.compiler import graph_from_canonical, load_flow

        which = request.WhichOneof("definition")
        if which == "source":
            if len(request.source) > self._limit:
                raise PayloadTooLarge(f"the flow source is over {self._limit} bytes")
            flow = load_flow(request.source, request.filename or "<flow>")
        elif which == "graph":
            if len(request.graph) > self._limit:
                raise PayloadTooLarge(f"the graph is over {self._limit} bytes")
            flow = graph_from_canonical(request.graph)
        else:
            raise InvalidRequest("RegisterDefinition needs a `source` or a `graph`")
        version, created = self._engine.register(flow)
        return pb.RegisterDefinitionResponse(name=flow.name, version=version, created=created)

    @_rpc
    def GetDefinition(
        self, request: pb.GetDefinitionRequest, context: grpc.ServicerContext
    ) -> pb.Definition:
        if not request.name:
            raise InvalidRequest("GetDefinition needs a flow name")
        stored = self._engine.get_definition(request.name, request.version or None)
        counts = self._engine.node_counts(stored.version) if request.include_node_counts else []
        return pb.Definition(
            name=stored.name,
            version=stored.version,
            graph=stored.canonical,
            registered_at_ms=stored.registered_at_ms,
            node_counts=[node_count_to_pb(c) for c in counts],
        )

    # -- instances -------------------------------------------------------------------------

    @_rpc
    def StartInstance(
        self, request: pb.StartInstanceRequest, context: grpc.ServicerContext
    ) -> pb.StartInstanceResponse:
        if not request.flow:
            raise InvalidRequest("StartInstance needs a flow name")
        value = self._json(request.input, "the start input")
        eager = None
        if request.HasField("eager") and request.eager.worker_id:
            eager = eager_from_pb(request.eager)
        ignored: list[str] = []
        trace = _trace_context(request.traceparent, request.tracestate, ignored)
        tracing = self._engine.trace_context  # a server that traces: its lines carry the ids
        if tracing:
            bind(_start_ids(request.instance_id, trace.get("traceparent", "")))
        try:
            result = self._engine.start(
                request.flow,
                value,
                version=request.version or None,
                instance_id=request.instance_id or None,
                eager=eager,
                # The calling credential is the starter (a human step's `exclude: [starter]`); a
                # server without credentials knows of no person.
                started_by=CALLER.get() or None,
                **trace,
            )
            if tracing:
                bind(_start_ids(result.instance_id, trace.get("traceparent", "")))
        finally:
            for what in ignored:  # said once the instance (and so its trace) is known
                _log.debug("StartInstance: ignored %s; the trace is derived instead", what)
        response = pb.StartInstanceResponse(
            instance_id=result.instance_id, version=result.version, created=result.created
        )
        if eager is not None and self._metrics is not None:
            self._eager_counted("start", result.eager_task is not None)
        if result.eager_task is not None:
            response.eager_task.CopyFrom(task_to_pb(result.eager_task, self._limits))
        return response

    @_rpc
    def SignalInstance(
        self, request: pb.SignalInstanceRequest, context: grpc.ServicerContext
    ) -> pb.SignalInstanceResponse:
        if not request.instance_id or not request.name:
            raise InvalidRequest("SignalInstance needs an instance id and a signal name")
        payload = self._json(request.payload, f"the payload of signal {request.name!r}")
        delivered = self._engine.signal(request.instance_id, request.name, payload)
        return pb.SignalInstanceResponse(delivered=delivered)

    @_rpc
    def CancelInstance(
        self, request: pb.CancelInstanceRequest, context: grpc.ServicerContext
    ) -> pb.CancelInstanceResponse:
        status = self._engine.cancel(request.instance_id, request.reason)
        return pb.CancelInstanceResponse(status=_status(status))

    @_rpc
    def DescribeInstance(
        self, request: pb.DescribeInstanceRequest, context: grpc.ServicerContext
    ) -> pb.Instance:
        view = self._engine.describe(request.instance_id, include_events=request.include_events)
        return instance_to_pb(view)

    @_rpc
    def ListInstances(
        self, request: pb.ListInstancesRequest, context: grpc.ServicerContext
    ) -> pb.ListInstancesResponse:
        size = min(request.page_size, MAX_PAGE_SIZE) if request.page_size > 0 else 100
        status = None
        if request.status != pb.INSTANCE_STATUS_UNSPECIFIED:
            status = InstanceStatus(pb.InstanceStatus.Name(request.status))
        where = InstanceFilter(
            flow=request.flow or None,
            version=request.version or None,
            status=status,
            started_after_ms=request.started_after_ms or None,
            started_before_ms=request.started_before_ms or None,
            id_contains=request.id_contains or None,
            where=parse_filter(request.where),
        )
        page = self._engine.find_instances(
            where, limit=size, page_token=request.page_token, counts=request.include_counts
        )
        return pb.ListInstancesResponse(
            instances=[instance_to_pb(v, full=False) for v in page.instances],
            next_page_token=page.next_page_token,
            counts=page.counts,
        )

    @_rpc
    def ListIncidents(
        self, request: pb.ListIncidentsRequest, context: grpc.ServicerContext
    ) -> pb.ListIncidentsResponse:
        page = self._engine.incidents(
            flow=request.flow,
            version=request.version,
            failed_after_ms=request.failed_after_ms,
            limit=min(request.limit, MAX_PAGE_SIZE) if request.limit > 0 else 100,
        )
        return pb.ListIncidentsResponse(
            incidents=[incident_to_pb(i) for i in page.incidents], failed=page.failed
        )

    @_rpc
    def WaitInstance(
        self, request: pb.WaitInstanceRequest, context: grpc.ServicerContext
    ) -> pb.Instance:
        if not request.instance_id:
            raise InvalidRequest("WaitInstance needs an instance id")
        wait = self._wait_budget(request.wait_ms, context)
        if wait > 0 and not self._waiting.acquire(blocking=False):
            raise Unavailable(
                f"this server already holds {self._max_waiting} long polls; retry later "
                "(or start it with more --threads)"
            )
        try:
            view = self._engine.wait_view(
                request.instance_id,
                wait,
                include_events=request.include_events,
                keep_waiting=lambda: not self._stopping.is_set() and context.is_active(),
            )
        finally:
            if wait > 0:
                self._waiting.release()
        return instance_to_pb(view)

    def _wait_budget(self, wait_ms: int, context: grpc.ServicerContext) -> float:
        """How long a long poll may wait: asked, capped, and short of the caller's deadline."""
        wait = min(max(wait_ms, 0) / 1000, self._max_wait)
        remaining = context.time_remaining()
        if remaining is not None:
            wait = min(wait, max(remaining - DEADLINE_MARGIN_S, 0.0))
        return wait

    # -- listings --------------------------------------------------------------------------

    @_rpc
    def ListDefinitions(
        self, request: pb.ListDefinitionsRequest, context: grpc.ServicerContext
    ) -> pb.ListDefinitionsResponse:
        found = self._engine.list_definitions(
            request.name or None, include_counts=request.include_counts
        )
        return pb.ListDefinitionsResponse(definitions=[definition_to_pb(d) for d in found])

    @_rpc
    def ListWorkers(
        self, request: pb.ListWorkersRequest, context: grpc.ServicerContext
    ) -> pb.ListWorkersResponse:
        within = request.seen_within_ms if request.seen_within_ms > 0 else WORKERS_SEEN_WITHIN_MS
        workers, now = self._engine.list_workers(within)
        queues = self._engine.queue_stats() if request.include_queues else []
        return pb.ListWorkersResponse(
            workers=[worker_to_pb(w) for w in workers],
            server_now_ms=now,
            queues=[queue_to_pb(q) for q in queues],
        )

    # -- tasks -----------------------------------------------------------------------------

    @_rpc
    def PollTasks(
        self, request: pb.PollTasksRequest, context: grpc.ServicerContext
    ) -> pb.PollTasksResponse:
        if not request.worker_id:
            raise InvalidRequest("PollTasks needs a worker id")
        queues = tuple(request.queues) or ("default",)
        max_tasks = min(max(request.max_tasks, 1), MAX_TASKS_PER_POLL)
        wait = self._wait_budget(request.wait_ms, context)
        if wait > 0 and not self._waiting.acquire(blocking=False):
            # Every waiting poll holds a handler thread; past this many, reports (CompleteTask,
            # AdvanceRun) would queue behind them. Refuse: the worker backs off and retries.
            raise Unavailable(
                f"this server already holds {self._max_waiting} long polls; retry later "
                "(or start it with more --threads)"
            )
        poll = _OpenPoll()
        with self._polls_lock:
            self._polls.setdefault(request.worker_id, set()).add(poll)
        began = time.monotonic()
        try:
            response = self._long_poll(request, context, queues, max_tasks, wait, poll)
            if self._metrics is not None:
                outcome = "tasks" if response.tasks else "empty"
                self._metrics.poll_wait.labels(outcome).observe(time.monotonic() - began)
            return response
        finally:
            with self._polls_lock:
                mine = self._polls.get(request.worker_id)
                if mine is not None:
                    mine.discard(poll)
                    if not mine:
                        del self._polls[request.worker_id]
            if wait > 0:
                self._waiting.release()

    def _long_poll(
        self,
        request: pb.PollTasksRequest,
        context: grpc.ServicerContext,
        queues: tuple[str, ...],
        max_tasks: int,
        wait: float,
        poll: _OpenPoll,
    ) -> pb.PollTasksResponse:
        deadline = time.monotonic() + wait
        note = WorkerNote(
            worker_id=request.worker_id,
            queues=queues,
            activities=tuple(request.activities),
            slots=request.slots,
            sdk=request.sdk,
        )
        while True:
            self._note(note)  # every slice: a worker inside a long poll stays "polling"
            tasks = self._engine.poll(
                queues, request.worker_id, max_tasks, activities=note.activities
            )
            if tasks:
                if not context.is_active():
                    # The caller went away while we claimed: give the tasks back at once (no
                    # attempt consumed) rather than leave them leased to nobody.
                    for task in tasks:
                        self._engine.release(task.task_id, task.lease, seq=1, reason="poll_gone")
                    return pb.PollTasksResponse()
                return pb.PollTasksResponse(tasks=[task_to_pb(t, self._limits) for t in tasks])
            left = deadline - time.monotonic()
            # A caller that went away must not be handed tasks: they would sit leased to
            # nobody until the lease expired.
            if left <= 0 or poll.ended or self._stopping.is_set() or not context.is_active():
                return pb.PollTasksResponse()
            poll.wake.clear()
            if poll.ended:  # EndPolls between the check above and the clear
                return pb.PollTasksResponse()
            self._engine.wait_for_tasks(queues, min(left, POLL_SLICE_S), waiter=poll.wake)
            # After a shutdown began the engine may be closing under us: claim nothing more.
            # A poll ended by EndPolls claims nothing more either: its worker is draining.
            if self._stopping.is_set() or poll.ended:
                return pb.PollTasksResponse()

    def _eager_counted(self, kind: str, hit: bool) -> None:
        if self._metrics is not None:
            self._metrics.eager.labels(kind, "hit" if hit else "miss").inc()

    def _note(self, note: WorkerNote) -> None:
        """Record the polling worker (throttled by the engine); bookkeeping never fails a poll.

        A database that cannot be reached is the ticker's to say, once and once again when it
        is back (server/_ticker.py); said here, it was a line per poll of every worker for as
        long as a failover lasted. Any other failure is a bug: one line (and its traceback)
        while it repeats."""
        try:
            self._engine.note_worker(note)
        except Unavailable:
            return
        except Exception as exc:
            self._noting.failed(exc, f"worker {note.worker_id[:80]}: {exc}")
        else:
            self._noting.succeeded()

    @_rpc
    def EndPolls(
        self, request: pb.EndPollsRequest, context: grpc.ServicerContext
    ) -> pb.EndPollsResponse:
        if not request.worker_id:
            raise InvalidRequest("EndPolls needs a worker id")
        with self._polls_lock:
            open_polls = list(self._polls.get(request.worker_id, ()))
        for poll in open_polls:
            poll.ended = True
            poll.wake.set()
        return pb.EndPollsResponse(ended=len(open_polls))

    @_rpc
    def CompleteTask(
        self, request: pb.CompleteTaskRequest, context: grpc.ServicerContext
    ) -> pb.TaskReportResponse:
        return self._report_one(request)  # type: ignore[return-value]

    @_rpc
    def FailTask(
        self, request: pb.FailTaskRequest, context: grpc.ServicerContext
    ) -> pb.TaskReportResponse:
        return self._report_one(request)  # type: ignore[return-value]

    @_rpc
    def ReleaseTask(
        self, request: pb.ReleaseTaskRequest, context: grpc.ServicerContext
    ) -> pb.TaskReportResponse:
        return self._report_one(request)  # type: ignore[return-value]

    @_rpc
    def AdvanceRun(
        self, request: pb.AdvanceRunRequest, context: grpc.ServicerContext
    ) -> pb.AdvanceRunResponse:
        return self._report_one(request)  # type: ignore[return-value]

    def _report_one(self, request: ReportMessage) -> pb.TaskReportResponse | pb.AdvanceRunResponse:
        allow_next = not self._stopping.is_set()
        report = report_from_pb(request, self._limit, allow_next=allow_next, grant=GRANT.get())
        if self._engine.trace_context:  # its log lines carry its step's ids, found if needed
            bind(partial(self._engine.task_trace, report.task_id))
        self._count_report(report)
        answer = self._engine.report(report)
        if report.next is not None:
            self._eager_counted("next", answer.next_task is not None)
        return answer_to_pb(report.kind, answer, self._limits)

    def _count_report(self, report: Report) -> None:
        if self._metrics is not None and report.kind is ReportKind.ADVANCE:
            self._metrics.run_batch.labels(str(report.final).lower()).observe(len(report.steps))

    @_rpc
    def ReportBatch(
        self, request: pb.ReportBatchRequest, context: grpc.ServicerContext
    ) -> pb.ReportBatchResponse:
        """Each report is answered as its own RPC would be; refusals are per report."""
        answers: list[pb.TaskReportAnswer | None] = [None] * len(request.reports)
        todo: list[tuple[int, Report]] = []
        allow_next, grant = not self._stopping.is_set(), GRANT.get()
        for n, item in enumerate(request.reports):
            carried = unbatched(item)
            if carried is None:
                empty = InvalidRequest(f"report {n + 1} of the batch is empty")
                answers[n] = error_answer_to_pb(empty)
                continue
            rpc, message = carried
            try:
                check_request(rpc, message)
                report = report_from_pb(message, self._limit, allow_next=allow_next, grant=grant)
                todo.append((n, report))
            except WiggleError as exc:
                answers[n] = error_answer_to_pb(exc)
        if len(todo) == 1 and self._engine.trace_context:  # (a batch's lines name no one step)
            bind(partial(self._engine.task_trace, todo[0][1].task_id))
        for _, report in todo:
            self._count_report(report)
        got = self._engine.report_many([r for _, r in todo]) if todo else []
        for (n, report), answer in zip(todo, got, strict=True):
            if isinstance(answer, WiggleError):
                if self._metrics is not None and isinstance(answer, StaleLease):
                    self._metrics.stale_reports.inc()
                answers[n] = error_answer_to_pb(answer)
            else:
                if report.next is not None:
                    self._eager_counted("next", answer.next_task is not None)
                wire = answer_to_pb(report.kind, answer, self._limits)
                if isinstance(wire, pb.AdvanceRunResponse):
                    answers[n] = pb.TaskReportAnswer(advance=wire)
                else:
                    answers[n] = pb.TaskReportAnswer(task=wire)
        return pb.ReportBatchResponse(answers=[a for a in answers if a is not None])

    @_rpc
    def Heartbeat(
        self, request: pb.HeartbeatRequest, context: grpc.ServicerContext
    ) -> pb.HeartbeatResponse:
        result = self._engine.heartbeat(
            request.task_id, request.lease, node_id=request.node_id, grant=GRANT.get()
        )
        return pb.HeartbeatResponse(
            lease_expires_at_ms=result.lease_expires_at_ms,
            instance_status=_status(result.instance_status),
            server_now_ms=result.server_now_ms,
        )


class _OpenPoll:
    """One waiting PollTasks call: the event it parks on, and whether EndPolls ended it."""

    __slots__ = ("ended", "wake")

    def __init__(self) -> None:
        self.wake = threading.Event()
        self.ended = False
