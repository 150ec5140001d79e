"""Running one leased task: a single SERVER step, or a LOCAL run that chains steps.

A LOCAL run starts at the leased node and keeps executing nodes itself while the shared handback
rule (`wiggle.traversal`) says the next node is a step this worker may run, reporting through
AdvanceRun: after every step in LOCAL_SYNC; in LOCAL_ASYNC at handback, right after a
`checkpoint` step, whenever `local_batch_size` results are buffered, and before a result would
push the request over the server's limit (`wiggle.localrun`). Between steps it checks whether
the worker is draining (hand back with reason SHUTDOWN, flushing the buffer), whether the lease
was lost (abandon: the server refuses our results anyway), whether enough lease is left to
start another step, and whether it has the next step's activity.

What a crash costs follows from when results reach the server: one step in SERVER and
LOCAL_SYNC, everything buffered since the last flush in LOCAL_ASYNC.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import grpc
import orjson

from wiggle import traversal
from wiggle._proto.wiggle.v1 import wiggle_pb2 as pb
from wiggle.expressions import EXPRESSION_ERROR_TYPE, NodeValue, failure_message
from wiggle.graph import Await, ExecutionMode, Graph, Join, Predicate, Task
from wiggle.localrun import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    RuntimeHandback,
    default_max_request_bytes,
    flush_after,
    over_request_limit,
    through_expressions,
    worker_steps,
)
from wiggle.traversal import Handback
from wiggle.worker._activities import Failure, Outcome, Registry, run_handler
from wiggle.worker._context import StepInfo
from wiggle.worker._definitions import DefinitionCache
from wiggle.worker._heartbeat import Lease, LeaseKeeper
from wiggle.worker._reporting import (
    check_result,
    refused,
    release,
    send_report,
)
from wiggle.worker._rpc import Rpc, RpcFailed

__all__ = ["LocalRun", "RunEnv", "hold_lease", "run_task"]

_log = logging.getLogger("wiggle.worker")

_RUNNING = pb.InstanceStatus.RUNNING
_MODES = {
    pb.ExecutionMode.SERVER: ExecutionMode.SERVER,
    pb.ExecutionMode.LOCAL_SYNC: ExecutionMode.LOCAL_SYNC,
    pb.ExecutionMode.LOCAL_ASYNC: ExecutionMode.LOCAL_ASYNC,
}


@dataclass
class RunEnv:
    """What running a task needs from its worker (a plain bundle, so tests can build one)."""

    rpc: Rpc
    registry: Registry
    queues: tuple[str, ...]
    definitions: DefinitionCache
    keeper: LeaseKeeper | None = None
    local_batch_size: int = 64
    #: Set when the worker drains: local runs hand back with reason SHUTDOWN at the next check.
    draining: threading.Event = field(default_factory=threading.Event)
    #: Set when the worker stops without draining: local runs drop their buffer and return.
    aborted: threading.Event = field(default_factory=threading.Event)
    #: Set: a SERVER-mode CompleteTask asks for the instance's next task, leased to this id.
    worker_id: str = ""
    #: None until the server first answers AdvanceRun; False once it answered UNIMPLEMENTED.
    advance_run_supported: bool | None = None
    #: A wiggle.tracing StepTracer when tracing is on (docs/observability.md); None: off.
    tracer: Any = None


def hold_lease(env: RunEnv, task: pb.Task) -> Lease:
    """Start keeping `task`'s lease alive; done on receipt, so a task queued for a thread
    does not lose its lease while it waits."""
    lease = Lease(
        task.task_id,
        task.lease,
        task.lease_expires_at_ms,
        task.timeout_ms or 60_000,
        task.server_now_ms,
    )
    if env.keeper is not None:
        env.keeper.hold(lease)
    if env.rpc.batcher is not None:  # batches of reports stay under the server's request limit
        env.rpc.batcher.note_limit(task.max_request_bytes)
    return lease


def run_task(env: RunEnv, task: pb.Task, lease: Lease | None = None) -> None:
    """Run `task` to its report, then any next task the report brought back (SERVER mode,
    `RunEnv.worker_id` set). Never raises: failures are logged, and a task given up while its
    lease may still be ours is released at once."""
    if lease is None:
        lease = hold_lease(env, task)
    nxt: pb.Task | None = task
    while nxt is not None:
        task, nxt = nxt, None
        try:
            if env.draining.is_set() and not env.aborted.is_set():
                # Received but not started before the drain began: give it back unrun, so the
                # drain costs no attempt and no lease expiry.
                release(env.rpc, lease, str(Handback.SHUTDOWN))
                continue
            graph = _local_graph(env, task)
            if graph is not None:
                LocalRun(env, task, graph, lease).run()
            else:
                nxt = run_server_step(env, task, lease)
        except Exception:
            _log.exception(
                "task %s (%s/%s) crashed in the worker", task.task_id, task.flow, task.node_id
            )
            if not lease.lost and not env.aborted.is_set():
                release(env.rpc, lease, "the worker failed running the task")
        finally:
            if env.keeper is not None:
                env.keeper.drop(lease)
        if nxt is not None:
            lease = hold_lease(env, nxt)


def _local_graph(env: RunEnv, task: pb.Task) -> Graph | None:
    """The graph to chain on, or None to run the task as one SERVER step."""
    if task.execution_mode not in (pb.ExecutionMode.LOCAL_SYNC, pb.ExecutionMode.LOCAL_ASYNC):
        return None
    if env.advance_run_supported is False:
        return None
    graph = env.definitions.get(task.flow, task.version)
    if graph is None:
        return None
    node = graph.nodes.get(task.node_id)
    if isinstance(node, Task | Predicate | Join) or (isinstance(node, Await) and node.apply):
        return graph
    _log.warning("task %s is at node %r, which a worker does not run", task.task_id, task.node_id)
    return None


def _decode(raw: bytes) -> Any:
    return orjson.loads(raw) if raw else None


def expression_outcome(value: NodeValue, task: pb.Task) -> Outcome:
    """An expression node's value as a step outcome: its boolean, its new context (held to the
    server's payload limit like any result), or its non-retryable failure."""
    if value.error is not None:
        message = failure_message(value.error)
        return Outcome(
            failure=Failure(message, non_retryable=True, error_type=EXPRESSION_ERROR_TYPE)
        )
    if value.predicate is not None:
        return Outcome(predicate=value.predicate)
    outcome = Outcome(context=orjson.dumps(value.context), value=value.context)
    return check_result(outcome, task.max_payload_bytes)


def _step_result(node_id: str, outcome: Outcome) -> pb.StepResult:
    if outcome.failure is not None:
        f = outcome.failure
        return pb.StepResult(
            node_id=node_id,
            failure=pb.StepFailure(
                message=f.message, non_retryable=f.non_retryable, error_type=f.error_type
            ),
        )
    if outcome.predicate is not None:
        return pb.StepResult(node_id=node_id, predicate=outcome.predicate)
    return pb.StepResult(node_id=node_id, context=outcome.context or b"null")


def run_server_step(env: RunEnv, task: pb.Task, lease: Lease) -> pb.Task | None:
    """SERVER mode: run the one step, then CompleteTask or FailTask; returns the instance's
    next task when CompleteTask leased it to this worker in the same transaction."""
    info = _info(task, task.node_id, task.activity, task.attempt, ExecutionMode.SERVER)
    # Without the graph the worker cannot tell a predicate from a task; a predicate's bool
    # encodes as JSON true/false, which is exactly what CompleteTask expects for it.
    act, ctx = env.registry.get(task.activity), _decode(task.input)
    if env.tracer is None:
        outcome = run_handler(act, task.activity, ctx, info, predicate=False)
    else:
        outcome, _ = env.tracer.run(
            task,
            node_id=task.node_id,
            activity=task.activity,
            attempt=task.attempt,
            loop_counts=_decode(task.loop_counts) or {},
            mode=str(ExecutionMode.SERVER),
            position=0,
            previous="",
            call=partial(run_handler, act, task.activity, ctx, info, predicate=False),
        )
    outcome = check_result(outcome, task.max_payload_bytes)
    return _report_single(env, task, lease, outcome, want_next=True)


def _report_single(
    env: RunEnv, task: pb.Task, lease: Lease, outcome: Outcome, *, want_next: bool = False
) -> pb.Task | None:
    if lease.lost:
        _log.info("task %s dropped: %s", task.task_id, lease.lost_reason)
        return None
    if outcome.failure is not None:
        f = outcome.failure
        request: Any = pb.FailTaskRequest(
            task_id=task.task_id,
            lease=task.lease,
            failure=pb.StepFailure(
                message=f.message, non_retryable=f.non_retryable, error_type=f.error_type
            ),
        )
        method, ask = "FailTask", False
    else:
        result = outcome.context
        if result is None:  # a predicate's value, reported in SERVER form
            result = b"true" if outcome.predicate else b"false"
        request = pb.CompleteTaskRequest(task_id=task.task_id, lease=task.lease, result=result)
        stopping = env.draining.is_set() or env.aborted.is_set()
        ask = want_next and bool(env.worker_id) and not stopping
        if ask:
            request.next.worker_id = env.worker_id
            request.next.queues.extend(env.queues)
            # Like PollTasks: the server leases only a next task this worker can run.
            request.next.activities.extend(env.registry.names())
        method = "CompleteTask"
    try:
        response = send_report(env.rpc, lease, method, request)
    except RpcFailed as exc:
        refused(env.rpc, lease, exc, method)
        return None
    if ask and response.HasField("next_task"):
        return response.next_task  # type: ignore[no-any-return]
    return None


def _info(
    task: pb.Task, node_id: str, activity: str, attempt: int, mode: ExecutionMode
) -> StepInfo:
    return StepInfo(
        instance_id=task.instance_id,
        node_id=node_id,
        attempt=attempt,
        flow=task.flow,
        version=task.version,
        activity=activity,
        execution_mode=mode,
        task_id=task.task_id,
    )


class LocalRun:
    """One local run from a leased task to its handback."""

    def __init__(self, env: RunEnv, task: pb.Task, graph: Graph, lease: Lease) -> None:
        self.env = env
        self.task = task
        self.graph = graph
        self.lease = lease
        self.mode = _MODES.get(task.execution_mode, ExecutionMode.LOCAL_SYNC)
        self.buffer: list[pb.StepResult] = []
        self.flushes = 0
        self.handback: str | None = None  # why the run ended, for logs and tests

    def run(self) -> None:
        task, graph, env = self.task, self.graph, self.env
        node_id = task.node_id
        activity = task.activity
        attempt = task.attempt
        ctx = _decode(task.input)
        loop_counts: Mapping[str, int] = _decode(task.loop_counts) or {}
        position, previous = 0, ""  # the step's place in the run, the span before it (tracing)
        while True:
            node = graph.nodes[node_id]
            self.lease.node_id = node_id
            info = _info(task, node_id, activity, attempt, self.mode)
            is_predicate = isinstance(node, Predicate)
            act = env.registry.get(activity)
            if env.tracer is None:
                outcome = run_handler(act, activity, ctx, info, predicate=False)
            else:
                outcome, previous = env.tracer.run(
                    task,
                    node_id=node_id,
                    activity=activity,
                    attempt=attempt,
                    loop_counts=loop_counts,
                    mode=str(self.mode),
                    position=position,
                    previous=previous,
                    call=partial(run_handler, act, activity, ctx, info, predicate=False),
                )
                position += 1
            if self.lease.lost:
                # Lost while the step ran: no report may follow, not even a size flush of what
                # was buffered before it (docs/worker-protocol.md, "The loop").
                _log.info("local run of task %s ends: %s", task.task_id, self.lease.lost_reason)
                self.handback = Handback.NOT_RUNNING
                return
            if is_predicate and outcome.failure is None and isinstance(outcome.value, bool):
                outcome = Outcome(predicate=outcome.value)
            else:
                # A result over a server limit fails its step here, at once and for good.
                outcome = check_result(outcome, task.max_payload_bytes)
            # Not a boolean at a predicate: the value goes as it is (a context), so the server
            # fails the step exactly as it does a SERVER-mode CompleteTask (same reason).
            ends = outcome.failure is not None or (is_predicate and outcome.predicate is None)
            result = _step_result(node_id, outcome)
            if self.buffer and self._over_request_limit(result):
                # The buffered steps end where this one began: the server keeps the lease at
                # `node_id`, and the step just run goes in the next batch.
                response = self._flush(final=False, reason="", next_node=node_id)
                if response is None or not response.keep_going:
                    return
            self.buffer.append(result)
            if ends:
                # The successful prefix and the failure go together, so the server applies the
                # prefix and then the step's retry policy in one transaction.
                self._finish(Handback.STEP_FAILED)
                return

            move = traversal.advance(
                graph,
                node_id,
                env.queues,
                predicate_value=outcome.predicate,
                loop_counts=loop_counts,
            )
            if not is_predicate:
                ctx = outcome.value
            # Expression nodes are evaluated here and travel with the step before them: never
            # flushed alone, never a reason to hand back.
            chain = through_expressions(
                graph, move, ctx, {"id": task.instance_id, "flow": task.flow}, env.queues
            )
            # An erring expression, or a set whose new context is over the payload limit,
            # ends the run there: nothing after it is sent.
            failed = False
            for expr_id, value in chain.values:
                expr_outcome = expression_outcome(value, task)
                self.buffer.append(_step_result(expr_id, expr_outcome))
                if expr_outcome.failure is not None:
                    failed = True
                    break
            if failed:
                self._finish(Handback.STEP_FAILED)
                return
            assert chain.move is not None
            move, ctx = chain.move, chain.context
            reason = move.handback or self._between_steps(move.next_node)
            if reason == "abandon":
                return
            if reason is not None:
                self._finish(reason)
                return
            assert move.next_node is not None
            if flush_after(
                self.mode,
                node,
                worker_steps(self.graph, [r.node_id for r in self.buffer]),
                self.env.local_batch_size,
            ):
                response = self._flush(final=False, reason="", next_node=move.next_node)
                if response is None or not response.keep_going:
                    return
            node_id = move.next_node
            next_node = graph.nodes[node_id]
            assert isinstance(next_node, Task | Predicate)
            activity = next_node.activity
            attempt = 1
            loop_counts = move.loop_counts

    def _renew_for(self, node_id: str) -> None:
        """The next step may run longer than the lease was last renewed for: renew it by that
        step's timeout first (a heartbeat naming the step)."""
        self.lease.node_id = node_id
        keeper = self.env.keeper or LeaseKeeper(self.env.rpc)
        keeper.beat(self.lease)

    def _between_steps(self, next_node: str | None) -> str | None:
        """Why not to start another step: a drain, a lost lease, a spent lease budget, an
        activity this worker does not have."""
        if self.env.aborted.is_set():
            self.handback = "aborted"
            return "abandon"  # stopped without draining: behave like a crash
        if self.lease.lost:
            _log.info(
                "local run of task %s abandoned: %s", self.task.task_id, self.lease.lost_reason
            )
            self.handback = Handback.NOT_RUNNING
            return "abandon"
        if self.env.advance_run_supported is False and self.flushes == 0:
            return "fallback"  # another run found out: report the first step the SERVER way
        if self.env.draining.is_set():
            return RuntimeHandback.SHUTDOWN
        node = self.graph.nodes.get(next_node or "")
        if isinstance(node, Task | Predicate) and node.timeout_ms > self.lease.length_ms:
            self._renew_for(node.id)  # a longer step after shorter ones: renew by its timeout
        if not traversal.lease_budget_left(self.lease.remaining_ms(), self.lease.length_ms):
            return RuntimeHandback.LEASE_BUDGET
        if isinstance(node, Task | Predicate) and self.env.registry.get(node.activity) is None:
            return RuntimeHandback.UNKNOWN_ACTIVITY
        return None

    def _over_request_limit(self, result: pb.StepResult) -> bool:
        """Whether adding `result` would push the AdvanceRun over the server's request limit
        (LOCAL_ASYNC: a LOCAL_SYNC buffer is empty here)."""
        limit = self.task.max_request_bytes or default_max_request_bytes(
            self.task.max_payload_bytes or DEFAULT_MAX_PAYLOAD_BYTES
        )
        request = pb.AdvanceRunRequest(task_id=self.task.task_id, lease=self.task.lease)
        request.steps.extend([*self.buffer, result])
        return over_request_limit(request.ByteSize(), limit)

    def _finish(self, reason: str) -> None:
        self.handback = reason
        self._flush(final=True, reason=reason)

    def _flush(
        self, *, final: bool, reason: str, next_node: str | None = None
    ) -> pb.AdvanceRunResponse | None:
        """Send the buffer; None when the run must stop (refused, not RUNNING, fallen back)."""
        if self.env.advance_run_supported is False and self.flushes == 0:
            self._fall_back()  # another run found out the server has no AdvanceRun
            return None
        request = pb.AdvanceRunRequest(
            task_id=self.task.task_id,
            lease=self.task.lease,
            steps=self.buffer,
            final=final,
            handback_reason=str(reason),
        )
        try:
            response: pb.AdvanceRunResponse = send_report(
                self.env.rpc, self.lease, "AdvanceRun", request
            )
        except RpcFailed as exc:
            self._flush_refused(exc)
            return None
        self.flushes += 1
        self.buffer.clear()
        self.env.advance_run_supported = True
        if response.instance_status != _RUNNING:
            self.handback = self.handback or Handback.NOT_RUNNING
            return None
        if not final and next_node is not None:
            # The server moved the token to `next_node` and renewed the lease by its timeout.
            node = self.graph.nodes[next_node]
            self.lease.renewed(
                response.lease_expires_at_ms,
                response.server_now_ms,
                length_ms=getattr(node, "timeout_ms", None),
            )
        return response

    def _flush_refused(self, exc: RpcFailed) -> None:
        if exc.code == grpc.StatusCode.UNIMPLEMENTED and self.flushes == 0:
            # An older server: report the first step the SERVER way (its lease is the task's),
            # and run every later task as a SERVER step. The rest of the buffer is dropped: those
            # steps run again as SERVER tasks, within LOCAL_ASYNC's at-least-once contract.
            if self.env.advance_run_supported is not False:  # say it once, not per run
                _log.warning("server does not implement AdvanceRun; running tasks in SERVER mode")
            self.env.advance_run_supported = False
            self._fall_back()
            return
        self.handback = self.handback or "refused"
        refused(self.env.rpc, self.lease, exc, "AdvanceRun")

    def _fall_back(self) -> None:
        """Report the first buffered step with CompleteTask / FailTask, as in SERVER mode."""
        outcome = _outcome_of(self.buffer[0])
        self.buffer.clear()
        self.handback = "fallback"
        _report_single(self.env, self.task, self.lease, outcome)


def _outcome_of(step: pb.StepResult) -> Outcome:
    from wiggle.worker._activities import Failure

    which = step.WhichOneof("outcome")
    if which == "failure":
        f = step.failure
        return Outcome(failure=Failure(f.message, f.non_retryable, f.error_type))
    if which == "predicate":
        return Outcome(predicate=step.predicate)
    return Outcome(context=bytes(step.context))
