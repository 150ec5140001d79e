"""An in-process worker: the three execution modes as docs/worker-protocol.md defines them,
calling the engine directly instead of over gRPC.

SERVER: one step per task, reported with CompleteTask (asking for the instance's next task, as
the Python worker does) or FailTask. LOCAL_SYNC and LOCAL_ASYNC: a local run from the leased
step, chained by the handback rule (`wiggle.traversal.advance`) and reported with AdvanceRun:
after every step in LOCAL_SYNC; in LOCAL_ASYNC at the handback, after a checkpoint step and
when a batch is full (`wiggle.localrun.flush_after`). The worker serves every queue and every
activity, and takes one task at a time, so a run is the same every time it is repeated.

Lease budgets and drains do not arise: the virtual clock stands still while steps run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from wiggle import traversal
from wiggle.engine import (
    EagerRequest,
    Engine,
    InstanceStatus,
    StepFailure,
    StepOutcome,
    TaskActivation,
)
from wiggle.expressions import EXPRESSION_ERROR_TYPE, failure_message
from wiggle.graph import Await, ExecutionMode, Graph, Join, Predicate, Task
from wiggle.localrun import Chain, flush_after, through_expressions, worker_steps
from wiggle.worker import StepInfo

from ._answers import Answers, Outcome

__all__ = ["WORKER_ID", "InProcessWorker"]

WORKER_ID = "wiggle-test"


class InProcessWorker:
    """Runs every READY task of `queues` on `answers`, one at a time."""

    def __init__(
        self,
        engine: Engine,
        answers: Answers,
        queues: Sequence[str],
        *,
        batch_size: int = 64,
        graphs: dict[str, Graph] | None = None,
    ) -> None:
        self.engine = engine
        self.answers = answers
        self.queues = list(queues)
        self.batch_size = batch_size
        # Graphs by version, shared with whoever registered them (versions never change).
        self._graphs: dict[str, Graph] = {} if graphs is None else graphs
        #: Lease a task to this worker in the same transaction (a start's first task, the
        #: next task after a CompleteTask), as eager dispatch does for a real worker.
        self.eager = EagerRequest(WORKER_ID, self.queues)

    def run_ready(self) -> int:
        """Run tasks until none is READY; returns how many steps ran. Never moves the clock."""
        steps = 0
        while True:
            tasks = self.engine.poll(self.queues, WORKER_ID, 1)
            if not tasks:
                return steps
            steps += self.run_task(tasks[0])

    def run_task(self, task: TaskActivation) -> int:
        if task.execution_mode is ExecutionMode.SERVER:
            return self._server_steps(task)
        return self._local_run(task)

    def graph(self, flow: str, version: str) -> Graph:
        """The graph of a version (cached: versions never change)."""
        graph = self._graphs.get(version)
        if graph is None:
            graph = self.engine.get_definition(flow, version).flow.graph
            self._graphs[version] = graph
        return graph

    def _call(
        self, task: TaskActivation, node_id: str, activity: str, attempt: int, value: Any
    ) -> Outcome:
        node = self.graph(task.flow, task.version).nodes[node_id]
        info = StepInfo(
            instance_id=task.instance_id,
            node_id=node_id,
            attempt=attempt,
            flow=task.flow,
            version=task.version,
            activity=activity,
            execution_mode=task.execution_mode,
            task_id=task.task_id,
        )
        wrapped = isinstance(node, Join | Await)
        return self.answers.call(activity, value, info, wrapped=wrapped)

    def _server_steps(self, task: TaskActivation) -> int:
        """SERVER: run, CompleteTask (with the next task leased to us) or FailTask."""
        steps = 0
        current: TaskActivation | None = task
        while current is not None:
            t = current
            out = self._call(t, t.node_id, t.activity, t.attempt, t.input)
            steps += 1
            if out.failure is not None:
                self.engine.fail(t.task_id, t.lease, out.failure)
                return steps
            _, current = self.engine.complete_and_next(t.task_id, t.lease, out.value, self.eager)
        return steps

    def _local_run(self, task: TaskActivation) -> int:
        """A local run, as the loop of docs/worker-protocol.md ("Local runs")."""
        graph = self.graph(task.flow, task.version)
        node_id, activity, attempt = task.node_id, task.activity, task.attempt
        value: Any = task.input
        counts = dict(task.loop_counts)
        buffer: list[StepOutcome] = []
        steps = 0

        def send(final: bool, reason: str = "") -> bool:
            """Send the buffer; whether the run may go on."""
            answer = self.engine.advance_run(
                task.task_id, task.lease, buffer, final=final, handback_reason=reason
            )
            buffer.clear()
            return answer.instance_status is InstanceStatus.RUNNING and answer.keep_going

        while True:
            node = graph.nodes[node_id]
            out = self._call(task, node_id, activity, attempt, value)
            steps += 1
            if out.failure is not None:
                buffer.append(StepOutcome(node_id, failure=out.failure))
                send(True, str(traversal.Handback.STEP_FAILED))
                return steps
            is_predicate = isinstance(node, Predicate)
            if is_predicate and not isinstance(out.value, bool):
                # Sent as it is: the server fails the step as it does in SERVER mode.
                buffer.append(StepOutcome(node_id, context=out.value))
                send(True, str(traversal.Handback.STEP_FAILED))
                return steps
            predicate = out.value if is_predicate else None
            if is_predicate:
                buffer.append(StepOutcome(node_id, predicate=predicate))
            else:
                buffer.append(StepOutcome(node_id, context=out.value))
            move = traversal.advance(
                graph, node_id, self.queues, predicate_value=predicate, loop_counts=counts
            )
            if not is_predicate:
                value = out.value
            # Expression nodes: evaluated here, in the same batch as the step before them.
            chain = through_expressions(
                graph, move, value, {"id": task.instance_id, "flow": task.flow}, self.queues
            )
            buffer += expression_outcomes(chain)
            if chain.failed:
                send(True, str(traversal.Handback.STEP_FAILED))
                return steps
            assert chain.move is not None
            move, value = chain.move, chain.context
            if move.handback is not None or move.next_node is None:
                send(True, str(move.handback or ""))
                return steps
            buffered = worker_steps(graph, [b.node_id for b in buffer])
            due = flush_after(task.execution_mode, node, buffered, self.batch_size)
            if due is not None and not send(False):
                return steps
            node_id, counts, attempt = move.next_node, dict(move.loop_counts), 1
            nxt = graph.nodes[node_id]
            assert isinstance(nxt, Task | Predicate)  # else the handback rule had stopped
            activity = nxt.activity


def expression_outcomes(chain: Chain) -> list[StepOutcome]:
    """The step outcomes of the expression nodes a run went through (docs/worker-protocol.md,
    "Expression nodes in a run"): a condition's boolean, a set's new context, or the
    non-retryable failure of the one that erred."""
    out = []
    for node_id, got in chain.values:
        if got.error is not None:
            failure = StepFailure(
                failure_message(got.error), non_retryable=True, error_type=EXPRESSION_ERROR_TYPE
            )
            out.append(StepOutcome(node_id, failure=failure))
        elif got.predicate is None:
            out.append(StepOutcome(node_id, context=got.context))
        else:
            out.append(StepOutcome(node_id, predicate=got.predicate))
    return out
