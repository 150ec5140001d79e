"""User flows under every execution mode: does each end the same way in every mode?

`check_flow` runs a flow with the user's handlers once per mode and database, in a fresh
embedded stack each (engine, gRPC server, the Python worker, a client), with the flow's
`execution` overridden to the mode and the same instance id in each (handlers that build keys
from it return the same context). Every handler call is counted by node. The runs must agree
on the final status, the final context, and, for runs that complete, which steps ran how often
(when an instance fails or is cancelled, which steps of its other branches ran first is a
matter of timing); every difference is reported (`wiggle.modes`, the LIVE rule). It is the
corpus's "modes agree" check for flows outside the corpus (`wiggle conformance --flow`).
`check_flows` does the same for many runs at once, sharing one stack per mode and database (one
worker per handlers registry): how the shipped definitions are checked.
"""

from __future__ import annotations

import functools
import itertools
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wiggle.conformance._cases import MISSING, Moment
from wiggle.conformance._databases import database_label, fresh_databases
from wiggle.jsonvalue import show
from wiggle.modes import LIVE, MODES, Difference, Ending, compiled_in_mode, differences, flow_queues

if TYPE_CHECKING:
    from wiggle.client import Client
    from wiggle.compiler import CompiledFlow
    from wiggle.worker import Registry

__all__ = [
    "FlowCheck",
    "FlowPlan",
    "FlowSignal",
    "ModeOutcome",
    "check_flow",
    "check_flows",
]

AT_START = Moment("at_start")
#: A signal name that answers a human step's task instead (docs/human-tasks.md).
TASK_PREFIX = "task:"


@dataclass(frozen=True)
class FlowSignal:
    """A signal sent once its moment comes: `at_start` (buffered until awaited), `started:<node>`
    (as that step of the flow starts in this run: sent from the worker, before the handler runs,
    so the signal is in before the step's result whatever the machine's load) or
    `AWAITING:<node>` (once the runner sees the instance parked there).

    `task:<step>` answers the human step's task with the payload, once its moment has come and
    the task is open (a plain signal of that name is refused: docs/human-tasks.md), as an
    admin named `wiggle-conformance-N`, N counting the run's answers: a task that needs two
    approvals is answered by two people."""

    name: str
    payload: Any
    when: Moment = AT_START


@dataclass(frozen=True)
class FlowPlan:
    """One run to check: the flow (last) after the child flows it starts, its handlers, its
    input and the signals to send."""

    flows: Sequence[CompiledFlow]
    registry: Registry
    value: Any
    signals: Sequence[FlowSignal] = ()
    label: str = ""


@dataclass
class ModeOutcome:
    mode: str
    database: str
    status: str = ""
    reason: str = ""
    context: Any = MISSING
    steps: dict[str, int] = field(default_factory=dict)  # node (flow/node in a child) -> runs
    seconds: float = 0.0
    problem: str = ""  # the run could not be judged (did not finish, a signal never sent)


@dataclass
class FlowCheck:
    label: str
    outcomes: list[ModeOutcome]
    differences: list[str]

    @property
    def agree(self) -> bool:
        return not self.differences and not any(o.problem for o in self.outcomes)

    def outcome(self, mode: str, database: str = "sqlite") -> ModeOutcome:
        return next(o for o in self.outcomes if o.mode == mode and o.database == database)


class _Counter:
    """Wraps every handler of a registry to note each run by instance, flow and node, and tells
    `on_run` (instance id) before the handler runs."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.runs: list[tuple[str, str, str]] = []  # (instance id, flow, node)
        self.on_run: Callable[[str], None] | None = None

    def wrap(self, registry: Registry) -> Registry:
        from wiggle.worker import Registry, step

        counted = Registry()
        for name in registry.names():
            act = registry.get(name)
            assert act is not None
            counted.register(self._wrapped(act.fn, act.is_async, step), name)
        return counted

    def _wrapped(self, fn: Callable[[Any], Any], is_async: bool, step: Any) -> Callable[[Any], Any]:
        def note() -> None:
            info = step()
            with self._lock:
                self.runs.append((info.instance_id, info.flow, info.node_id))
            if self.on_run is not None:
                self.on_run(info.instance_id)

        if is_async:

            @functools.wraps(fn)
            async def run_async(ctx: Any) -> Any:
                note()
                return await fn(ctx)

            return run_async

        @functools.wraps(fn)
        def run(ctx: Any) -> Any:
            note()
            return fn(ctx)

        return run

    def counts(self, instances: set[str], root_flow: str) -> dict[str, int]:
        with self._lock:
            runs = list(self.runs)
        out: dict[str, int] = {}
        for instance, flow, node in runs:
            if instance in instances:
                key = node if flow == root_flow else f"{flow}/{node}"
                out[key] = out.get(key, 0) + 1
        return out


@dataclass
class _Live:
    """One plan's run in progress."""

    plan: FlowPlan
    root: str
    root_flow: str
    pending: list[FlowSignal]
    outcome: ModeOutcome
    t0: float
    done: bool = False
    answered: int = 0  # human tasks answered so far (each by another person)
    #: Held while sending: the worker's threads (a step starting) and the runner's loop both do.
    sending: threading.Lock = field(default_factory=threading.Lock)


def _descendants(client: Client, root: str) -> set[str]:
    found, frontier = {root}, [root]
    while frontier:
        for child in client.describe(frontier.pop()).child_instance_ids:
            if child not in found:
                found.add(child)
                frontier.append(child)
    return found


def _run_mode(
    url: str, mode: str, database: str, plans: Sequence[FlowPlan], deadline_s: float
) -> list[ModeOutcome]:
    from wiggle.client import Client
    from wiggle.engine import Engine
    from wiggle.graph import ExecutionMode
    from wiggle.server import Server, ServerConfig
    from wiggle.worker import Worker

    counter = _Counter()
    variants = [[compiled_in_mode(f, mode) for f in p.flows] for p in plans]
    with ExitStack() as stack:
        engine = Engine(url, default_mode=ExecutionMode(mode))
        stack.callback(engine.close)
        server = Server(engine, ServerConfig(address="127.0.0.1:0", grace_s=2.0))
        address = f"127.0.0.1:{server.start()}"
        stack.callback(server.stop)
        # One worker per handlers registry, on the queues of its flows: two registries may
        # bind one activity name differently, so they never share a queue.
        owners: dict[str, int] = {}
        served: dict[int, tuple[Registry, set[str]]] = {}
        for plan, flows in zip(plans, variants, strict=True):
            queues = flow_queues(flows)
            for q in queues:
                if owners.setdefault(q, id(plan.registry)) != id(plan.registry):
                    raise ValueError(f"queue {q!r} is used by flows with different handlers")
            served.setdefault(id(plan.registry), (plan.registry, set()))[1].update(queues)
        for registry, queues in served.values():
            worker = Worker(
                address,
                queues=sorted(queues),
                registry=counter.wrap(registry),
                concurrency=16,
                poll_wait_ms=2_000,
            )
            worker.start()
            stack.callback(worker.stop)
        client = stack.enter_context(Client(address))
        for flow in {f.version: f for flows in variants for f in flows}.values():
            client.deploy(flow)
        # The same instance id in every mode (each has a database of its own), so a handler
        # that builds an idempotency key from it returns the same context in each. Known before
        # the start, so that a step starting at once already finds its run.
        live = [
            _Live(
                p,
                f"flowcheck-{i + 1}",
                flows[-1].name,
                list(p.signals),
                ModeOutcome(mode, database),
                0.0,
            )
            for i, (p, flows) in enumerate(zip(plans, variants, strict=True))
        ]
        by_root = {r.root: r for r in live}
        counter.on_run = lambda instance: _step_started(client, counter, by_root.get(instance))
        for r, flows in zip(live, variants, strict=True):
            main = flows[-1]
            client.start(main.name, r.plan.value, version=main.version, instance_id=r.root)
            r.t0 = time.monotonic()
            _send_due(client, counter, r)  # at_start: right after its own start
        deadline = time.monotonic() + deadline_s
        while not all(r.done for r in live):
            for r in live:
                if not r.done:
                    _step(client, counter, r, deadline, deadline_s)
            if not all(r.done for r in live):
                time.sleep(0.02)
        for r in live:
            instances = _descendants(client, r.root)
            r.outcome.steps = counter.counts(instances, r.root_flow)
    return [r.outcome for r in live]


def _step_started(client: Client, counter: _Counter, r: _Live | None) -> None:
    """A step of the run is about to start (in a worker thread): send what that makes due."""
    if r is not None and r.pending and r.pending[0].when.kind == "started":
        _send_due(client, counter, r)


def _send_due(client: Client, counter: _Counter, r: _Live) -> None:
    """Send the run's signals whose moment has come, in order."""
    with r.sending:
        while r.pending:
            when = r.pending[0].when
            if when.kind == "at_start":
                due = True
            elif when.kind == "started":
                due = when.key in counter.counts({r.root}, r.root_flow)
            else:
                tokens = client.describe(r.root).tokens
                due = any(t.node_id == when.node and str(t.state) == when.kind for t in tokens)
            if not due:
                break
            signal = r.pending[0]
            if signal.name.startswith(TASK_PREFIX):
                if not _answer_task(client, r.root, signal, f"wiggle-conformance-{r.answered + 1}"):
                    break  # its task is not open yet
                r.answered += 1
            else:
                client.signal(r.root, signal.name, signal.payload)
            r.pending.pop(0)


def _answer_task(client: Client, root: str, signal: FlowSignal, person: str) -> bool:
    """Answer the open task of the human step a `task:<step>` signal names, as an admin named
    `person`; False when it has none open (yet)."""
    step = signal.name.removeprefix(TASK_PREFIX)
    for task in client.list_tasks(instance_id=root, admin=True, person=person):
        if task.node_id == step:
            client.complete_task(task.task_id, signal.payload, person=person, admin=True)
            return True
    return False


def _step(client: Client, counter: _Counter, r: _Live, deadline: float, deadline_s: float) -> None:
    """Send the run's due signals; finish its outcome once it has ended (or timed out)."""
    _send_due(client, counter, r)
    view = client.describe(r.root)
    timed_out = time.monotonic() > deadline
    if not view.status.finished and not timed_out:
        return
    o = r.outcome
    o.status, o.reason, o.context = str(view.status), view.reason, view.context
    o.seconds = time.monotonic() - r.t0
    if not view.status.finished:
        o.problem = f"still RUNNING after {deadline_s:g} s"
        client.cancel(r.root, "wiggle conformance --flow: gave up")
    elif r.pending:
        o.problem = "ended before these signals were sent: " + ", ".join(
            f"{s.name} ({s.when})" for s in r.pending
        )
    r.done = True


def _differences(outcomes: Sequence[ModeOutcome]) -> list[str]:
    """How the modes ended the run differently on each database (wiggle.modes, the LIVE rule:
    status, context, and how often each step ran when both runs completed)."""
    problems: list[str] = []
    for database, group in itertools.groupby(outcomes, key=lambda o: o.database):
        endings = [Ending(o.mode, o.status, o.context, o.reason, o.steps) for o in group]
        problems += [_worded(d, database) for d in differences(endings, LIVE)]
    return problems


def _worded(d: Difference, database: str) -> str:
    a, b = d.reference, d.other
    pair = f"{a.mode} vs {b.mode} on {database}"
    if d.aspect == "status":
        return f"status {a.status} vs {b.status} ({pair})"
    if d.aspect == "context":
        return f"context {show(a.context, 200)} vs {show(b.context, 200)} ({pair})"
    if d.aspect == "steps":
        n, m = a.steps.get(d.step, 0), b.steps.get(d.step, 0)
        return f"step {d.step} ran {n} times vs {m} times ({pair})"
    return f"{d.aspect} differs ({pair})"


def check_flows(
    plans: Sequence[FlowPlan],
    *,
    modes: Sequence[str] = MODES,
    databases: Sequence[str] = ("sqlite",),
    deadline_s: float = 60.0,
    on_outcome: Callable[[FlowPlan, ModeOutcome], None] | None = None,
) -> list[FlowCheck]:
    """Each plan under each mode on each database (all plans of a mode and database in one
    stack, concurrently); per plan, its outcomes and every difference between the modes."""
    per_plan: list[list[ModeOutcome]] = [[] for _ in plans]
    for spec in databases:
        label = database_label(spec)
        with fresh_databases(spec) as new_database:
            for mode in modes:
                outcomes = _run_mode(new_database(), mode, label, plans, deadline_s)
                for i, outcome in enumerate(outcomes):
                    per_plan[i].append(outcome)
                    if on_outcome is not None:
                        on_outcome(plans[i], outcome)
    return [
        FlowCheck(plan.label, outs, _differences(outs))
        for plan, outs in zip(plans, per_plan, strict=True)
    ]


def check_flow(
    flow: str | Path | CompiledFlow,
    handlers: str | Registry,
    value: Any,
    *,
    signals: Sequence[FlowSignal] = (),
    register: Sequence[str | Path | CompiledFlow] = (),
    modes: Sequence[str] = MODES,
    databases: Sequence[str] = ("sqlite",),
    deadline_s: float = 60.0,
    on_outcome: Callable[[ModeOutcome], None] | None = None,
) -> FlowCheck:
    """Run `flow` (after the child flows of `register`) with `handlers` (a registry, or a file
    or module to load one from) under each mode on each database; its outcomes and every
    difference between the modes. FlowError for a bad flow."""
    from wiggle.compiler import load_flow_file
    from wiggle.worker import load_handlers

    flows = [f if not isinstance(f, str | Path) else load_flow_file(f) for f in [*register, flow]]
    registry = load_handlers(handlers) if isinstance(handlers, str) else handlers
    plan = FlowPlan(flows, registry, value, signals, label=flows[-1].name)
    report = None if on_outcome is None else (lambda _plan, o: on_outcome(o))
    [check] = check_flows(
        [plan], modes=modes, databases=databases, deadline_s=deadline_s, on_outcome=report
    )
    return check
