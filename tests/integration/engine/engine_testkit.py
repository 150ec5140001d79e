"""The engine suite's test kit: a tiny in-test worker that runs Python callables.

Modes: "server" (poll, complete/fail one step at a time), "sync" (advance_run after every step),
"async" (advance_run once per local run). Handlers take the task input, or (input, task) when
they declare two parameters; raising `Fail` fails the step.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from typing import Any

from wiggle.compiler import CompiledFlow, load_flow
from wiggle.engine import (
    Engine,
    InstanceStatus,
    InstanceView,
    StepFailure,
    StepOutcome,
    TaskActivation,
    VirtualClock,
)
from wiggle.graph import Graph, Predicate, Task
from wiggle.localrun import through_expressions
from wiggle.testing._worker import expression_outcomes
from wiggle.traversal import advance
from wiggle.worker import NonRetryable
from wiggle.worker._context import StepInfo, running

MODES = ["server", "sync", "async"]


class Fail(Exception):
    def __init__(self, message: str, non_retryable: bool = False) -> None:
        super().__init__(message)
        self.non_retryable = non_retryable


class Driver:
    def __init__(
        self,
        engine: Engine,
        handlers: dict[str, Callable[..., Any]],
        *,
        mode: str = "server",
        queues: tuple[str, ...] = ("default",),
        worker_id: str = "test-worker",
    ) -> None:
        self.engine = engine
        self.handlers = handlers
        self.mode = mode
        self.queues = queues
        self.worker_id = worker_id
        self.graphs: dict[str, Graph] = {}
        self.ran: list[str] = []  # activities in the order they ran

    def deploy(self, text: str) -> CompiledFlow:
        flow = load_flow(text)
        self.engine.register(flow)
        self.graphs[flow.version] = flow.graph
        return flow

    def _call(
        self, activity: str, value: Any, task: TaskActivation, node_id: str | None = None
    ) -> Any:
        fn = self.handlers[activity]
        self.ran.append(activity)
        # Handlers may ask `step()` what they run, as under a real worker.
        info = StepInfo(
            task.instance_id,
            node_id or task.node_id,
            task.attempt if node_id in (None, task.node_id) else 1,
            task.flow,
            task.version,
            activity,
            task.execution_mode,
            task.task_id,
        )
        with running(info):
            if len(inspect.signature(fn).parameters) >= 2:
                return fn(value, task)
            try:
                return fn(value)
            except NonRetryable as exc:
                raise Fail(str(exc), non_retryable=True) from exc

    def step(self) -> int:
        tasks = self.engine.poll(self.queues, self.worker_id, 32)
        for task in tasks:
            self.run_task(task)
        return len(tasks)

    def run_task(self, task: TaskActivation) -> None:
        if self.mode == "server":
            try:
                out = self._call(task.activity, task.input, task)
            except Fail as f:
                self.engine.fail(task.task_id, task.lease, StepFailure(str(f), f.non_retryable))
                return
            self.engine.complete(task.task_id, task.lease, out)
            return
        self._run_local(task)

    def _run_local(self, task: TaskActivation) -> None:
        graph = (
            self.graphs.get(task.version)
            or self.engine.get_definition(task.flow, task.version).flow.graph
        )
        node_id, value, counts = task.node_id, task.input, dict(task.loop_counts)
        ctx = task.input
        buf: list[StepOutcome] = []
        while True:
            node = graph.nodes[node_id]
            activity = task.activity if node_id == task.node_id else node.activity  # type: ignore[union-attr]
            try:
                out = self._call(activity, value, task, node_id)
            except Fail as f:
                buf.append(StepOutcome(node_id, failure=StepFailure(str(f), f.non_retryable)))
                self.engine.advance_run(
                    task.task_id, task.lease, buf, final=True, handback_reason="step_failed"
                )
                return
            if isinstance(node, Predicate):
                if not isinstance(out, bool):
                    buf.append(StepOutcome(node_id, context=out))
                    self.engine.advance_run(task.task_id, task.lease, buf, final=True)
                    return
                buf.append(StepOutcome(node_id, predicate=out))
                move = advance(graph, node_id, self.queues, predicate_value=out, loop_counts=counts)
            else:
                buf.append(StepOutcome(node_id, context=out))
                ctx = out
                move = advance(graph, node_id, self.queues, loop_counts=counts)
            # Expression nodes after the step: evaluated here, sent with it.
            instance = {"id": task.instance_id, "flow": task.flow}
            chain = through_expressions(graph, move, ctx, instance, self.queues)
            buf += expression_outcomes(chain)
            if chain.failed:
                self.engine.advance_run(
                    task.task_id, task.lease, buf, final=True, handback_reason="step_failed"
                )
                return
            assert chain.move is not None
            move, ctx = chain.move, chain.context
            if move.handback is not None or move.next_node is None:
                self.engine.advance_run(
                    task.task_id, task.lease, buf, final=True, handback_reason=str(move.handback)
                )
                return
            checkpoint = isinstance(node, Task) and node.checkpoint
            if self.mode == "sync" or checkpoint:
                res = self.engine.advance_run(task.task_id, task.lease, buf, final=False)
                buf = []
                if res.instance_status is not InstanceStatus.RUNNING or not res.keep_going:
                    return
            node_id, value, counts = move.next_node, ctx, dict(move.loop_counts)

    def run(
        self,
        instance_id: str,
        *,
        timeout: float = 30.0,
        until: Callable[[InstanceView], bool] | None = None,
    ) -> InstanceView:
        """Drive (poll + tick) until the instance finishes or `until` holds. On an engine with
        a virtual clock, idle means the clock moves to just past the next timer or lease
        expiry (a lease is reclaimed once strictly past it)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.engine.tick()
            worked = self.step()
            view = self.engine.describe(instance_id)
            if until is not None:
                if until(view):
                    return view
            elif view.status is not InstanceStatus.RUNNING:
                return self.engine.describe(instance_id, include_events=True)
            if not worked:
                self.idle()
        raise AssertionError(f"instance {instance_id} did not get there in {timeout}s: {view}")

    def idle(self) -> None:
        """Nothing to run: move a virtual clock to what falls due next, or nap briefly."""
        clock = self.engine.db.clock
        due = self.engine.next_due_ms() if isinstance(clock, VirtualClock) else None
        if isinstance(clock, VirtualClock) and due is not None:
            clock.advance(max(0, due + 1 - clock.now_ms()))
            return
        time.sleep(min(0.02, max(0.0, self.engine.next_wakeup_s())))


def drain_batch(engine: Engine, batch_id: str, timeout: float = 60.0) -> Any:
    """Tick `engine` until the bulk action `batch_id` is no longer RUNNING; its view."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        handled = engine.tick()
        view = engine.get_batch(batch_id)
        if view.state != "RUNNING":
            return view
        if not handled:
            # Wait as the server's ticker does: until the engine's next wake-up (its bulk
            # budget's refill while a batch is busy) or a commit of this process.
            engine.wait_for_timers(engine.next_wakeup_s())
    raise AssertionError(f"batch {batch_id} did not finish: {engine.get_batch(batch_id)}")


def events_of(view: InstanceView, kind: str) -> list[Any]:
    return [e for e in view.events if e.kind == kind]
