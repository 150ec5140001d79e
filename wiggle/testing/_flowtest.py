"""`FlowTest`: one instance of a flow, run by the real engine in-process on a virtual clock.

The engine is Wiggle's own, on an in-memory SQLite database, reading a `VirtualClock`; the worker
is `_worker.InProcessWorker`. Nothing moves in real time: after every action (start, signal,
advance, cancel) every step that can run has run and every timer that is due has fired, and
`advance("3d")` moves the clock timer by timer, so a three-day deadline takes milliseconds.

Instead of starting an instance, a FlowTest can apply a schedule of its flow: the engine's
leader fires it as the clock moves (the clock jumps from one due fire or timer to the next, so a
simulated day costs milliseconds), `outage("6h")` moves the clock with no server running, and
`fires()` is the schedule's record of what it fired and skipped.
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
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
from wiggle.errors import InstanceNotRunning, WiggleError
from wiggle.graph import HUMAN_SIGNAL_PREFIX, ExecutionMode, Graph
from wiggle.modes import MODES, compiled_in_mode, flow_queues
from wiggle.schedules import Schedule, load_schedule_file, nominal_times
from wiggle.worker import Registry, load_handlers

from ._answers import Answers
from ._expect import Observed, ScheduledFire, check, check_fires, path_problem
from ._load import fire_time, parse_results, subflow_files
from ._model import Answer, Expect, ExpectedFire
from ._trace import Trace, trace
from ._worker import InProcessWorker

__all__ = ["MODES", "FlowTest", "Harness", "ScenarioError", "ScheduledFire", "resolve_mode"]

#: A run that keeps arming timers is stopped after this many, rather than spinning forever.
MAX_TIMERS = 10_000

#: How far back a harness's clean-up reaches: every finished instance, whatever its end time.
_EVER_MS = 1 << 50

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
    register (subflow targets beside a flow file are found by themselves). Instead of `start`,
    `apply_schedule` lets a schedule of the flow start its instances.
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
        self.schedule: Schedule | None = None

    # -- driving ------------------------------------------------------------------------------

    def start(
        self, input: Any = None, *, instance_id: str | None = None, person: str | None = None
    ) -> str:
        """Start the instance at the start time, then run what can run. `person`: who starts
        it (a credential's name on a server), the starter a human step's `exclude: [starter]`
        keeps from answering; None: no person (as a schedule's fire)."""
        if self.instance_id is not None:
            raise ScenarioError("this FlowTest has started its instance already")
        if self.schedule is not None:
            raise ScenarioError("this FlowTest's instances are its schedule's: it starts none")
        self.clock.set(self.start_ms)
        # Eager dispatch, as a worker beside the client gets it: the first task is leased in
        # the start's own transaction.
        result = self.engine.start(
            self.flow.name,
            input,
            version=self.flow.version,
            instance_id=instance_id,
            eager=self.worker.eager,
            started_by=person,
        )
        self.instance_id = result.instance_id
        if result.eager_task is not None:
            self.worker.run_task(result.eager_task)
        self.settle()
        return result.instance_id

    def apply_schedule(self, schedule: str | os.PathLike[str] | Schedule) -> None:
        """Apply a schedule of this flow at the start time (a file, or a loaded `Schedule`):
        from then on the leader fires it as the clock moves, each fire starting an instance of
        the flow, answered like the test's own. The schedule is pinned to the version under
        test."""
        if self.schedule is not None or self.instance_id is not None:
            raise ScenarioError("this FlowTest has started its instance or schedule already")
        if not isinstance(schedule, Schedule):
            schedule = load_schedule_file(schedule)
        if schedule.document is None:
            raise ScenarioError("apply a schedule loaded by wiggle.schedules.load_schedule(...)")
        if schedule.flow != self.flow.name:
            raise ScenarioError(
                f"schedule {schedule.name!r} starts flow {schedule.flow!r}, not {self.flow.name!r}"
            )
        # The version registered here (the flow in this test's mode), whatever else the
        # harness holds of the flow; the stored document is what the leader fires from.
        version = self.flow.version
        pinned = replace(
            schedule, version=version, document={**schedule.document, "version": version}
        )
        self.clock.set(self.start_ms)
        self.engine.apply_schedule(pinned)
        self.schedule = pinned
        self.settle()

    def settle(self) -> None:
        """Run every step that can run and fire every timer due now, until neither is left.
        Under a schedule that buffers fires, the leader ticks again after anything happened:
        an instance that ended may let a buffered fire start (a server's leader does that at
        its next tick)."""
        buffers = self.schedule is not None and self.schedule.overlap.startswith("buffer")
        ticked = False
        while True:
            ran = self.worker.run_ready()
            due = self.engine.next_due_ms()
            is_due = due is not None and due <= self.clock.now_ms()
            again = buffers and bool(ran or ticked)
            if not is_due and not again:
                return
            ticked = bool(self.engine.tick())
            if not ticked and not again:
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

    def outage(self, duration: str | int | float) -> None:
        """No server runs for `duration`: the clock moves on, but no leader ticks (no timer, no
        schedule fires) and no step runs. Then a server is back: its first tick decides what
        fell due meanwhile, and what that readies runs."""
        self.settle()
        self.clock.set(self.clock.now_ms() + _ms(duration))
        self.settle()

    def run_to_end(self) -> None:
        """Let time run on, timer by timer, until the instance ends or waits for nothing but a
        signal. Under a schedule, the schedule stops firing (it is paused) and the instances it
        started run to their end."""
        if self.schedule is not None:
            self.engine.pause_schedule(self.schedule.name, "the scenario's timeline ended")
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
        """Send the signal `name`; a human step's signal (`task:<name>`) answers its open task
        as an admin named "wiggle test" (the form is checked; who may answer is not)."""
        if name.startswith(HUMAN_SIGNAL_PREFIX):
            self.complete_task(name[len(HUMAN_SIGNAL_PREFIX) :], payload, admin=True)
            return
        self.engine.signal(self._id(), name, payload)
        self.settle()

    def complete_task(
        self,
        name: str,
        answer: Any = None,
        *,
        person: str = "wiggle test",
        groups: Sequence[str] = (),
        admin: bool = False,
        request_id: str | None = None,
    ) -> None:
        """Answer the open human task of the step `name` as `person` (docs/human-tasks.md).
        ScenarioError when the instance has no such task open."""
        open_ = [
            t
            for t in self.engine.list_tasks(person, admin=True, instance_id=self._id())
            if t.node_id == name
        ]
        if not open_:
            raise ScenarioError(
                f"no human task {name!r} is open: the instance is not waiting for it"
            )
        self.engine.complete_task(
            open_[0].task_id, person, groups, answer, request_id=request_id, admin=admin
        )
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
        """The trace of the instance (or of each one the schedule started) and of every subflow
        child they started, on their graphs."""
        out: list[tuple[Graph, Trace]] = []
        todo = self.started if self.schedule is not None else [self._id()]
        while todo:
            view = self.engine.describe(todo.pop(0), include_events=True)
            graph = self._graph(view)
            out.append((graph, trace(graph, view.events)))
            todo.extend(view.child_instance_ids)
        return out

    def observed(self, instance_id: str | None = None) -> Observed:
        """What the instance (or the one named, say one the schedule started) looks like now."""
        view = self.engine.describe(instance_id or self._id(), include_events=True)
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
        context_at, path, visits, skips, waiting_at, calls, events; under a schedule fired and
        skipped too); AssertionError lists every one that fails."""
        known = set(Expect.__dataclass_fields__) - {"has_context", "where"}
        unknown = sorted(set(expectations) - known)
        if unknown:
            raise TypeError(f"unknown expectation {', '.join(unknown)}")
        if "status" in expectations:
            expectations["status"] = str(
                getattr(expectations["status"], "value", expectations["status"])
            )
        for key in ("fired", "skipped"):
            if key in expectations:
                expectations[key] = [self._expected_fire(v) for v in expectations[key]]
        wanted = Expect(has_context="context" in expectations, **expectations)
        problems = self.problems(wanted)
        if problems:
            raise AssertionError("\n".join(problems))

    def _expected_fire(self, value: Any) -> ExpectedFire:
        if self.schedule is None:
            raise ScenarioError("fired and skipped are about a schedule: apply_schedule first")
        if isinstance(value, ExpectedFire):
            return value
        reason = None
        if isinstance(value, Mapping):
            value, reason = value["at"], value.get("reason")
        ms = fire_time(value, self.schedule)
        if ms is None:
            raise ValueError(
                f"{value!r} is neither an RFC 3339 instant with an offset nor an instance id of "
                f"schedule {self.schedule.name!r}"
            )
        return ExpectedFire(ms, reason, value)

    def problems(self, expect: Expect) -> list[str]:
        """Every way the run falls short of `expect`, now. Under a schedule: its fires, the
        calls of the whole run, and the rest for each instance it started."""
        if self.schedule is None:
            return check(expect, self.observed())
        fires = self.fires()
        span = (self.start_ms, self.clock.now_ms())
        problems = check_fires(expect, fires, self.schedule, span)
        if expect.calls:
            totals = Expect(calls=expect.calls)
            problems += check(totals, Observed("", "", None, (), (), self.calls, ()))
        if expect.about_instances():
            rest = replace(expect, calls={}, fired=None, skipped=None)
            started = [f.instance_id for f in fires if f.instance_id is not None]
            if not started:
                problems.append(
                    f"expected instances to check, but schedule {self.schedule.name!r} started none"
                )
            for ident in started:
                problems += [f"instance {ident}: {p}" for p in check(rest, self.observed(ident))]
        return problems

    # -- a schedule's fires -------------------------------------------------------------------

    def fires(self) -> list[ScheduledFire]:
        """Every nominal time the schedule decided so far, oldest first: started (with its
        instance), buffered or skipped (with the reason)."""
        if self.schedule is None:
            return []
        rows = [
            (f.nominal_ms, f.until_ms, f.count, f.outcome, f.reason, f.instance_id)
            for f in self.engine.schedule_fires(self.schedule.name)
        ]
        out: list[ScheduledFire] = []
        for nominal, until, count, outcome, reason, ident in rows:
            times = [int(nominal)]
            if count > 1:  # a run of times skipped for one reason is one record
                spec = self.schedule.spec
                times = list(nominal_times(spec, int(nominal) - 1, until_ms=int(until)))[:count]
            out += [ScheduledFire(n, str(outcome).lower(), ident, reason) for n in times]
        return sorted(out, key=lambda f: f.nominal_ms)

    @property
    def started(self) -> list[str]:
        """The instances the schedule started, in the order of their nominal times."""
        return [f.instance_id for f in self.fires() if f.instance_id is not None]

    # -- lifetime -----------------------------------------------------------------------------

    def _id(self) -> str:
        if self.instance_id is None and self.schedule is not None:
            raise ScenarioError(
                "under a schedule there is no instance of the test's own: see `started`, "
                "`observed(instance_id)` and `fires()`"
            )
        if self.instance_id is None:
            raise ScenarioError("start the instance first (FlowTest.start)")
        return self.instance_id

    def _graph(self, view: InstanceView) -> Graph:
        return self.worker.graph(view.flow, view.version)

    def close(self) -> None:
        """Cancel an instance still running (so a shared harness starts clean), and close the
        engines when they are this test's own. A schedule is deleted, and with its instances
        every finished instance of the engine: another run of the harness crossing the same
        nominal times starts instances of the same ids."""
        if self._own:
            self.harness.close()
            return
        if self.instance_id is not None:
            with contextlib.suppress(InstanceNotRunning):  # it ended: nothing to cancel
                self.engine.cancel(self.instance_id, "the scenario ended")
        if self.schedule is not None:
            started = self.started
            with contextlib.suppress(WiggleError):
                self.engine.delete_schedule(self.schedule.name)
            for ident in started:
                with contextlib.suppress(InstanceNotRunning):
                    self.engine.cancel(ident, "the scenario ended")
            self.engine.prune(-_EVER_MS)

    def __enter__(self) -> FlowTest:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
