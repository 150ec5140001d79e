"""`FlowTest`: one instance of a flow, run by the real engine in-process on a virtual clock.

The engine is Wiggle's own, on an in-memory SQLite database, reading a `VirtualClock`; the worker
is `_worker.InProcessWorker`. Nothing moves in real time: after every action (start, signal,
advance, cancel) every step that can run has run and every timer that is due has fired, and
`advance("3d")` moves the clock timer by timer, so a three-day deadline takes milliseconds.
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from wiggle.compiler import CompiledFlow, load_flow_file, parse_duration
from wiggle.engine import (
    DEFAULT_START_MS,
    Engine,
    InstanceStatus,
    InstanceView,
    TokenState,
    VirtualClock,
    parse_instant_ms,
)
from wiggle.errors import InstanceNotRunning
from wiggle.graph import ExecutionMode, Graph
from wiggle.modes import MODES, compiled_in_mode, flow_queues
from wiggle.worker import Registry, load_handlers

from ._answers import Answers
from ._expect import Observed, check, path_problem
from ._load import parse_results, subflow_files
from ._model import Answer, Expect
from ._trace import Trace, trace
from ._worker import InProcessWorker

__all__ = ["MODES", "FlowTest", "Harness", "ScenarioError", "resolve_mode"]

#: A run that keeps arming timers is stopped after this many, rather than spinning forever.
MAX_TIMERS = 10_000

Handlers = str | os.PathLike[str] | Registry | Mapping[str, Callable[..., Any]] | None


class ScenarioError(Exception):
    """A test that cannot go on as written (time cannot go back, a second start...)."""


def resolve_mode(mode: str | ExecutionMode | None, flow: CompiledFlow) -> str:
    """The mode a run uses: the one asked for, else the flow's own (DEFAULT: SERVER)."""
    if mode is None:
        mode = flow.graph.execution
    text = str(getattr(mode, "value", mode)).upper()
    if text == "DEFAULT":
        return "SERVER"
    if text not in MODES:
        raise ValueError(f"unknown mode {mode!r}: choose from {', '.join(MODES)}")
    return text


class Harness:
    """A virtual clock and one in-memory engine per mode, shared by many runs (the scenario
    runner reuses it for every scenario; a lone FlowTest has its own)."""

    def __init__(self, start_ms: int = DEFAULT_START_MS) -> None:
        self.clock = VirtualClock(start_ms)
        self._engines: dict[str, Engine] = {}
        self._variants: dict[tuple[str, str], CompiledFlow] = {}  # (version, mode) -> variant
        self.graphs: dict[str, Graph] = {}  # version -> graph, of every variant registered
        self._ids: dict[str, int] = {}  # runs so far per "mode name"

    def engine(self, mode: str) -> Engine:
        engine = self._engines.get(mode)
        if engine is None:
            engine = Engine("sqlite://", default_mode=ExecutionMode(mode), clock=self.clock)
            self._engines[mode] = engine
        return engine

    def register(self, flows: Sequence[CompiledFlow], mode: str) -> list[CompiledFlow]:
        """`flows` with their execution set to `mode`, registered on that mode's engine."""
        variants = []
        for flow in flows:
            variant = self._variants.get((flow.version, mode))
            if variant is None:
                variant = compiled_in_mode(flow, mode)
                self.engine(mode).register(variant)
                self._variants[(flow.version, mode)] = variant
                self.graphs[variant.version] = variant.graph
            variants.append(variant)
        return variants

    def instance_id(self, name: str, mode: str) -> str:
        """An instance id for a run called `name` on `mode`'s engine: the name itself the
        first time, then `name-2`, `name-3`... So a scenario's instance has the same id in
        every mode (handlers that build keys from it agree), and ids never clash."""
        key = f"{mode} {name}"
        self._ids[key] = n = self._ids.get(key, 0) + 1
        return name if n == 1 else f"{name}-{n}"

    def close(self) -> None:
        for engine in self._engines.values():
            engine.close()
        self._engines.clear()


def _flow(flow: str | os.PathLike[str] | CompiledFlow) -> tuple[CompiledFlow, Path | None]:
    if isinstance(flow, CompiledFlow):
        return flow, None
    path = Path(flow)
    return load_flow_file(path), path


def _registry(handlers: Handlers) -> Registry | Mapping[str, Callable[..., Any]] | None:
    if handlers is None or isinstance(handlers, Registry | Mapping):
        return handlers
    return load_handlers(handlers)


def _start_ms(start_time: str | int | datetime | None) -> int:
    if start_time is None:
        return DEFAULT_START_MS
    if isinstance(start_time, int):
        return start_time
    if isinstance(start_time, datetime):
        return int(start_time.timestamp() * 1000)
    ms = parse_instant_ms(start_time)
    if ms is None:
        raise ValueError(f"{start_time!r} is not an RFC 3339 instant with an offset")
    return ms


def _ms(duration: str | int | float) -> int:
    if isinstance(duration, str):
        return parse_duration(duration)
    return int(duration * 1000) if isinstance(duration, float) else int(duration)


class FlowTest:
    """One instance of `flow` on the real engine, a virtual clock and an in-process worker.

    `handlers`: a handlers file or module, a `Registry`, or a mapping of activity name to
    function. `results`: activity results as in a scenario file (`{"kyc_approved": True,
    "request_kyc": [{"fail": "busy"}, {"handler": True}]}`), tried before the handlers.
    `mode`: SERVER, LOCAL_SYNC or LOCAL_ASYNC (default the flow's own). `flows`: other flows to
    register (subflow targets beside a flow file are found by themselves).
    """

    def __init__(
        self,
        flow: str | os.PathLike[str] | CompiledFlow,
        *,
        handlers: Handlers = None,
        results: Mapping[str, Any] | None = None,
        mode: str | ExecutionMode | None = None,
        flows: Sequence[str | os.PathLike[str] | CompiledFlow] = (),
        start_time: str | int | datetime | None = None,
        harness: Harness | None = None,
        answers: Mapping[str, Sequence[Answer] | Answer] | None = None,
    ) -> None:
        main, path = _flow(flow)
        others = [_flow(f)[0] for f in flows]
        if path is not None:
            files, _ = subflow_files(path, {main.name, *(f.name for f in others)})
            others += [load_flow_file(f) for f in files]
        self.mode = resolve_mode(mode, main)
        self._own = harness is None
        self.harness = harness or Harness()
        self.clock = self.harness.clock
        self.start_ms = _start_ms(start_time)
        self.engine = self.harness.engine(self.mode)
        variants = self.harness.register([*others, main], self.mode)
        self.flow = variants[-1]
        if results is not None:
            answers = {**(answers or {}), **parse_results(results, [*others, main])}
        self.answers = Answers(answers or {}, _registry(handlers))
        self.worker = InProcessWorker(
            self.engine, self.answers, sorted(flow_queues(variants)), graphs=self.harness.graphs
        )
        self.instance_id: str | None = None

    # -- driving ------------------------------------------------------------------------------

    def start(self, input: Any = None, *, instance_id: str | None = None) -> str:
        """Start the instance at the start time, then run what can run."""
        if self.instance_id is not None:
            raise ScenarioError("this FlowTest has started its instance already")
        self.clock.set(self.start_ms)
        # Eager dispatch, as a worker beside the client gets it: the first task is leased in
        # the start's own transaction.
        result = self.engine.start(
            self.flow.name,
            input,
            version=self.flow.version,
            instance_id=instance_id,
            eager=self.worker.eager,
        )
        self.instance_id = result.instance_id
        if result.eager_task is not None:
            self.worker.run_task(result.eager_task)
        self.settle()
        return result.instance_id

    def settle(self) -> None:
        """Run every step that can run and fire every timer due now, until neither is left."""
        while True:
            self.worker.run_ready()
            due = self.engine.next_due_ms()
            if due is None or due > self.clock.now_ms() or not self.engine.tick():
                return

    def advance(self, duration: str | int | float) -> None:
        """Move the clock forward (`"3d"`, or milliseconds; a float is seconds), firing every
        timer that falls due on the way at its own time, in order."""
        target = self.clock.now_ms() + _ms(duration)
        self._run_until(target)
        self.clock.set(max(target, self.clock.now_ms()))
        self.engine.tick()
        self.settle()

    def advance_to(self, ms_since_start: int) -> None:
        if ms_since_start < self.now_ms:
            raise ScenarioError(
                f"the clock is {self.now_ms} ms past the start already; it cannot go back"
            )
        self.advance(ms_since_start - self.now_ms)

    def run_to_end(self) -> None:
        """Let time run on, timer by timer, until the instance ends or waits for nothing but a
        signal."""
        self._run_until(None)

    def _run_until(self, target: int | None) -> None:
        self.settle()
        for _ in range(MAX_TIMERS):
            # An instance that ended has nothing armed: `due` is None then (a harness's other
            # instances never keep timers: each run cancels its own when it closes).
            due = self.engine.next_due_ms()
            if due is None or (target is not None and due > target):
                return
            now = self.clock.now_ms()
            self.clock.set(max(due, now))
            if not self.engine.tick() and due <= now:
                self.clock.set(now + 1)  # a lease is reclaimed only once strictly past it
                self.engine.tick()
            self.settle()
        raise ScenarioError(f"the instance armed more than {MAX_TIMERS} timers; stopped")

    def signal(self, name: str, payload: Any = None) -> None:
        self.engine.signal(self._id(), name, payload)
        self.settle()

    def cancel(self, reason: str = "") -> None:
        self.engine.cancel(self._id(), reason)
        self.settle()

    # -- what happened ------------------------------------------------------------------------

    @property
    def now_ms(self) -> int:
        """Virtual milliseconds since the start."""
        return self.clock.now_ms() - self.start_ms

    def view(self, *, events: bool = True) -> InstanceView:
        return self.engine.describe(self._id(), include_events=events)

    @property
    def status(self) -> InstanceStatus:
        return self.view(events=False).status

    @property
    def context(self) -> Any:
        return self.view(events=False).context

    @property
    def reason(self) -> str:
        return self.view(events=False).reason

    @property
    def calls(self) -> Counter[str]:
        """How many times each activity ran (every attempt, subflow children included)."""
        return Counter(self.answers.calls)

    @property
    def path(self) -> list[str]:
        return self.trace().path

    @property
    def waiting_at(self) -> list[str]:
        """The nodes of the instance's live tokens."""
        live = [t.node_id for t in self.view(events=False).tokens if t.state is not TokenState.DONE]
        return sorted(live)

    def trace(self) -> Trace:
        view = self.view()
        return trace(self._graph(view), view.events)

    def traces(self) -> list[tuple[Graph, Trace]]:
        """The trace of the instance and of every subflow child it started, on their graphs."""
        out: list[tuple[Graph, Trace]] = []
        todo = [self._id()]
        while todo:
            view = self.engine.describe(todo.pop(0), include_events=True)
            graph = self._graph(view)
            out.append((graph, trace(graph, view.events)))
            todo.extend(view.child_instance_ids)
        return out

    def observed(self) -> Observed:
        view = self.view()
        return Observed(
            status=view.status.value,
            reason=view.reason,
            context=view.context,
            path=trace(self._graph(view), view.events).path,
            waiting_at=sorted(t.node_id for t in view.tokens if t.state is not TokenState.DONE),
            calls=self.calls,
            events=view.events,
        )

    # -- assertions ---------------------------------------------------------------------------

    def assert_path(self, expected: Sequence[str]) -> None:
        """The instance passed exactly these nodes, in this order (AssertionError shows both
        paths)."""
        problem = path_problem(expected, self.path)
        if problem:
            raise AssertionError(problem)

    def assert_visits(self, *nodes: str) -> None:
        """The path passes `nodes` in this order, others in between allowed."""
        self.expect(visits=list(nodes))

    def expect(self, **expectations: Any) -> None:
        """Check expectations named as in a scenario file's `expect` (status, reason, context,
        context_at, path, visits, skips, waiting_at, calls, events); AssertionError lists
        every one that fails."""
        known = set(Expect.__dataclass_fields__) - {"has_context", "where"}
        unknown = sorted(set(expectations) - known)
        if unknown:
            raise TypeError(f"unknown expectation {', '.join(unknown)}")
        if "status" in expectations:
            expectations["status"] = str(
                getattr(expectations["status"], "value", expectations["status"])
            )
        wanted = Expect(has_context="context" in expectations, **expectations)
        problems = check(wanted, self.observed())
        if problems:
            raise AssertionError("\n".join(problems))

    # -- lifetime -----------------------------------------------------------------------------

    def _id(self) -> str:
        if self.instance_id is None:
            raise ScenarioError("start the instance first (FlowTest.start)")
        return self.instance_id

    def _graph(self, view: InstanceView) -> Graph:
        return self.worker.graph(view.flow, view.version)

    def close(self) -> None:
        """Cancel an instance still running (so a shared harness starts clean), and close the
        engines when they are this test's own."""
        if self.instance_id is not None and not self._own:
            with contextlib.suppress(InstanceNotRunning):  # it ended: nothing to cancel
                self.engine.cancel(self.instance_id, "the scenario ended")
        if self._own:
            self.harness.close()

    def __enter__(self) -> FlowTest:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
