"""Running the corpus: one server per (database, mode), the worker under test as a process.

For each database and each mode the runner starts an Engine whose default mode is that mode
(case flows leave `execution` unset, so the default is what they run in), a gRPC server on a
loopback port with a fresh token, and deploys every case's flows. Then two phases:

1. every case without injected faults, many at once;
2. each case with faults alone, since a kill takes down whatever else the worker was running.

Both run against one worker process per session serving the queues `default` and `other`, which
the faults kill (and replace), stop (and replace) or freeze, plus a second one serving `side`
(so that a queue change can hand a run over to another worker).

A run is watched through DescribeInstance and the trace file the activities write; signals,
cancels and faults fire at their moments; the outcome is checked against the expectation. The
server records every task it hands out and every report and heartbeat (`_recorder`), and the
orchestration is judged from that record (`_orchestration`): how the worker drove each mode,
not just where the instance ended.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wiggle.conformance._cases import Case, Fault, Moment, Run
from wiggle.conformance._check import (
    RunResult,
    check_outcome,
    check_reports,
    check_retry_delays,
    check_steps,
    show,
)
from wiggle.conformance._databases import database_label, fresh_databases
from wiggle.conformance._orchestration import RunContext, check_orchestration, render_reports
from wiggle.conformance._recorder import Recorder
from wiggle.conformance._trace import Trace, TraceLine
from wiggle.conformance._worker_process import WorkerProcess

if TYPE_CHECKING:
    from wiggle.graph import Graph

__all__ = ["BATCH_SIZE", "MODES", "RunnerOptions", "run_corpus"]

MODES = ("SERVER", "LOCAL_SYNC", "LOCAL_ASYNC")

#: The worker's LOCAL_ASYNC batch size (WIGGLE_CONFORMANCE_BATCH_SIZE) and the server's limits
#: in every session: small, so that a few steps reach a full batch or the size limit.
BATCH_SIZE = 5
MAX_PAYLOAD_BYTES = 64 * 1024
MAX_REQUEST_BYTES = 256 * 1024
#: The queues of the session's two workers: the one the faults hit, and a second one.
MAIN_QUEUES = "default,other"
SIDE_QUEUES = "side"
#: How long a stopped worker's poll may stay parked in the server (its wait slice, and more).
_POLL_GONE_S = 5.0
#: How long a started worker may take to begin polling before the cases go ahead regardless.
_WORKER_READY_S = 60.0

#: How long to keep watching after an instance ended, to catch a step that runs too late (a
#: stale worker, a step after a cancel). Longer where faults or cancels make that likely.
_SETTLE_S = 0.05
_SETTLE_EVENTFUL_S = 0.3


@dataclass(frozen=True)
class RunnerOptions:
    modes: Sequence[str]
    databases: Sequence[str]
    worker: str  # the command that starts the worker under test
    parallel: int = 16  # cases run at once in phase 1
    verbose: bool = False  # on a failed run, add the instance's trace and event log
    on_result: Callable[[RunResult], None] | None = None
    #: Judge how the worker drove each run (reports per mode), not only its outcome.
    orchestration: bool = True
    #: Run the modes of a database at once (False: one after another).
    modes_at_once: bool = True


class _Session:
    """One (database, mode): engine, server, client, trace and the current worker process."""

    def __init__(self, url: str, mode: str, database: str, options: RunnerOptions, tmp: Path):
        from wiggle.graph import ExecutionMode
        from wiggle.server import embedded_stack

        self.mode = mode
        self.database = database
        self.options = options
        self.tmp = tmp
        self._stack = ExitStack()
        self.token = secrets.token_urlsafe(24)
        self.recorder = Recorder()
        embedded = self._stack.enter_context(
            embedded_stack(
                url,
                default_mode=ExecutionMode(mode),
                token=self.token,
                interceptors=[self.recorder],
                max_payload_bytes=MAX_PAYLOAD_BYTES,
                max_request_bytes=MAX_REQUEST_BYTES,
            )
        )
        self.engine, self.client, self.address = embedded.engine, embedded.client, embedded.address
        self.trace = Trace(tmp / f"trace-{mode}-{uuid.uuid4().hex[:8]}.jsonl")
        self.env = {
            **os.environ,
            "WIGGLE_ADDRESS": self.address,
            "WIGGLE_AUTH_TOKEN": self.token,
            "WIGGLE_CONFORMANCE_TRACE": str(self.trace.path),
            "WIGGLE_CONFORMANCE_BATCH_SIZE": str(BATCH_SIZE),
        }
        for key in ("WIGGLE_TLS_CA", "WIGGLE_QUEUES"):
            self.env.pop(key, None)
        self.worker: WorkerProcess | None = None
        self.side: WorkerProcess | None = None
        self.graphs: dict[str, Graph] = {}
        self._tls_address: str | None = None
        self._tls_ca: str = ""

    def close(self) -> None:
        self._stack.close()

    def _process(self, label: str, queues: str, **env: str) -> WorkerProcess:
        log = self.tmp / f"worker-{self.mode}-{label.replace('/', '_')}.log"
        return WorkerProcess(self.options.worker, {**self.env, "WIGGLE_QUEUES": queues, **env}, log)

    def _start(self, *workers: tuple[WorkerProcess, str]) -> None:
        """Start each (process, its queues) and wait until each polls: a case's clock must not
        run while a worker boots (elapsed-time bounds would charge it its runtime's start-up)."""
        seen = [
            (tuple(q.split(",")), self.recorder.polls_seen(tuple(q.split(",")))) for _, q in workers
        ]
        for process, _ in workers:
            process.start()
        for key, before in seen:
            self.recorder.wait_polling(key, before, _WORKER_READY_S)

    @contextmanager
    def worker_process(self, label: str) -> Iterator[WorkerProcess]:
        self.worker = self._process(label, MAIN_QUEUES)
        self.side = self._process(f"{label}-side", SIDE_QUEUES)
        self._start((self.worker, MAIN_QUEUES), (self.side, SIDE_QUEUES))
        try:
            yield self.worker
        finally:
            self.worker.stop()
            self.side.stop()
            self.worker = self.side = None

    def restart(self) -> None:
        """A fresh main worker (after a case that changed what it believes of the server)."""
        if self.worker is not None:
            self.worker.stop()
            self.recorder.wait_polls_ended(tuple(MAIN_QUEUES.split(",")), _POLL_GONE_S)
            self._start((self.worker, MAIN_QUEUES))

    @contextmanager
    def tls_worker(self, label: str) -> Iterator[None]:
        """For one run: the usual workers stand aside and a worker connected over TLS (to a
        second server of the same engine, with the same token) serves every queue."""
        if self._tls_address is None:
            from wiggle.conformance._tls import make_certificates
            from wiggle.server import Server, ServerConfig

            certs = make_certificates(self.tmp / f"tls-{self.mode}-{uuid.uuid4().hex[:8]}")
            server = Server(
                self.engine,
                ServerConfig(
                    address="localhost:0",
                    token=self.token,
                    grace_s=1.0,
                    tls_cert=certs.cert,
                    tls_key=certs.key,
                    max_payload_bytes=MAX_PAYLOAD_BYTES,
                    max_request_bytes=MAX_REQUEST_BYTES,
                ),
                interceptors=[self.recorder],
            )
            self._tls_address = f"localhost:{server.start()}"
            self._stack.callback(server.stop)
            self._tls_ca = str(certs.ca)
        assert self.worker is not None and self.side is not None
        self.worker.stop()
        self.side.stop()
        self.recorder.wait_polls_ended(None, _POLL_GONE_S)
        tls = self._process(
            label,
            f"{MAIN_QUEUES},{SIDE_QUEUES}",
            WIGGLE_ADDRESS=self._tls_address,
            WIGGLE_TLS_CA=self._tls_ca,
        )
        self._start((tls, f"{MAIN_QUEUES},{SIDE_QUEUES}"))
        try:
            yield
        finally:
            tls.stop()
            self.recorder.wait_polls_ended(None, _POLL_GONE_S)
            self._start((self.worker, MAIN_QUEUES), (self.side, SIDE_QUEUES))

    def inject(self, fault: Fault) -> None:
        worker = self.worker
        if worker is None:
            return
        if fault.action == "kill":
            worker.kill()
            worker.start()  # a fresh process takes over once the lease has expired
        elif fault.action == "term":
            worker.stop()  # drains: what it computed is reported before it exits
            worker.start()
        else:
            worker.pause(fault.ms)

    def deploy(self, case: Case) -> str:
        """Register the case's flows (children first, in order); the version under test."""
        from wiggle.compiler import load_flow

        version = ""
        for flow in [*case.flows, case.flow]:
            source = json.dumps(flow).encode()
            version = self.client.deploy(source, filename=str(case.path)).version
            compiled = load_flow(source, str(case.path))
            self.graphs[compiled.version] = compiled.graph
        return version


class _Watch:
    """What one run has done so far: its trace lines and the tokens of its instances."""

    def __init__(self, session: _Session, case: Case, root: str, mark: int) -> None:
        self.session = session
        self.root = root
        self.mark = mark
        self.root_flow = str(case.flow["name"])
        # Child flow names belong to this case alone and its runs go one at a time, so a trace
        # line of such a flow written after `mark` is one of this run's children.
        self.child_flows = {str(f["name"]) for f in case.flows} - {self.root_flow}
        self._tokens: dict[str, list[tuple[str, str]]] | None = None

    def lines(self) -> list[TraceLine]:
        return self.session.trace.since(self.mark)

    def key(self, line: TraceLine) -> str | None:
        if line.instance_id == self.root:
            return line.node_id
        if line.flow in self.child_flows:
            return f"{line.flow}/{line.node_id}"
        return None

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for line in self.lines():
            key = self.key(line)
            if key is not None:
                counts[key] = counts.get(key, 0) + 1
        return counts

    def descendants(self, flow: str | None = None) -> list[Any]:
        """Child instances (any depth) of the root, optionally only those of `flow`."""
        client = self.session.client
        found: dict[str, Any] = {}
        known = {self.root}
        changed = True
        while changed:  # a grandchild's parent may be listed after it: repeat to a fixpoint
            changed = False
            for name in sorted(self.child_flows):
                for inst in client.list_instances(flow=name, limit=1000):
                    if inst.parent_instance_id in known and inst.instance_id not in found:
                        found[inst.instance_id] = inst
                        known.add(inst.instance_id)
                        changed = True
        return [i for i in found.values() if flow is None or i.flow == flow]

    def forget_tokens(self) -> None:
        self._tokens = None

    def reached(self, moment: Moment) -> bool:
        if moment.kind == "at_start":
            return True
        if moment.kind == "started":
            return any(self.key(line) == moment.key for line in self.lines())
        if self._tokens is None:
            self._tokens = {}
        flow = moment.flow or ""
        if flow not in self._tokens:
            ids = [self.root] if not flow else [i.instance_id for i in self.descendants(flow)]
            self._tokens[flow] = [
                (t.node_id, str(t.state))
                for i in ids
                for t in self.session.client.describe(i).tokens
            ]
        return (moment.node, moment.kind) in self._tokens[flow]


def _send(client: Any, root: str, signal: Any, problems: list[str]) -> None:
    """Send one signal; one the case expects refused must be refused with its words."""
    from wiggle.errors import InvalidRequest

    if signal.refused is None:
        client.signal(root, signal.name, signal.payload)
        return
    try:
        client.signal(root, signal.name, signal.payload)
    except InvalidRequest as exc:
        if signal.refused not in str(exc):
            problems.append(f"signal {signal.name} refused as {exc}; expected {signal.refused!r}")
        return
    problems.append(f"signal {signal.name} accepted; expected a refusal ({signal.refused!r})")


def _execute(session: _Session, case: Case, run: Run, version: str) -> RunResult:
    if run.transport == "tls":
        with session.tls_worker(f"{case.id}-tls"):
            return _execute_run(session, case, run, version)
    session.recorder.arm(run.server_faults)
    try:
        return _execute_run(session, case, run, version)
    finally:
        session.recorder.disarm()
        if run.server_faults:
            session.restart()  # e.g. a worker that fell back to SERVER steps after UNIMPLEMENTED


def _execute_run(session: _Session, case: Case, run: Run, version: str) -> RunResult:
    from wiggle.errors import WiggleError

    expect = run.expect
    result = RunResult(case.id, run.index, session.mode, session.database)
    expected_steps = expect.steps_for(session.mode)
    result.optional = frozenset(k for k, c in expected_steps.items() if c.min == 0)
    client = session.client
    mark = session.trace.refresh()
    t0 = time.monotonic()
    try:
        started = client.start(str(case.flow["name"]), run.input, version=version)
    except WiggleError as exc:
        if expect.start_error is not None and expect.start_error in str(exc):
            result.status = "REFUSED"
        else:
            result.problems.append(f"start refused: {exc}")
        return result
    root = started.instance_id
    result.instance_id = root
    if expect.start_error is not None:
        result.problems.append(f"start accepted; expected a refusal ({expect.start_error!r})")
        client.cancel(root, "conformance cleanup")
        return result

    watch = _Watch(session, case, root, mark)
    signals = list(run.signals)
    faults = list(run.faults)
    cancel = run.cancel
    deadline = t0 + expect.deadline_s
    delay = 0.03
    while True:
        session.trace.refresh()
        watch.forget_tokens()
        for fault in [f for f in faults if watch.reached(f.when)]:
            faults.remove(fault)
            session.inject(fault)
            watch.forget_tokens()
        while signals and watch.reached(signals[0].when):
            signal = signals.pop(0)
            _send(client, root, signal, result.problems)
            # The next signal's moment must be judged on the state after this one.
            watch.forget_tokens()
        if cancel is not None and watch.reached(cancel):
            client.cancel(root, run.cancel_reason)
            cancel = None
        view = client.describe(root)
        pending = bool(signals or faults or cancel is not None)
        if view.status.finished:
            break
        now = time.monotonic()
        if expect.status == "RUNNING" and not pending and now - t0 > 0.5:
            counts = watch.counts()
            # Parked: the steps have run and no token is leased (its report is not in yet).
            parked = not any(str(t.state) == "LEASED" for t in view.tokens)
            if parked and all(counts.get(k, 0) >= c.min for k, c in expected_steps.items()):
                break
        if now > deadline:
            break
        time.sleep(delay)
        # Polls are what loads the server (in this process) most: keep them sparse once nothing
        # is due, frequent while a moment is pending so it is caught promptly.
        delay = min(delay * 1.25, 0.05 if pending else 0.25)

    eventful = bool(run.cancel or run.faults) or expect.status != "COMPLETED"
    settle = _SETTLE_EVENTFUL_S if eventful else _SETTLE_S
    time.sleep(settle if expect.settle_ms is None else expect.settle_ms / 1000)
    session.trace.refresh()
    view = client.describe(root)
    result.status = str(view.status)
    result.context = view.context
    result.steps = watch.counts()
    result.seconds = time.monotonic() - t0
    if not view.status.finished and expect.status != "RUNNING":
        result.problems.append(f"still RUNNING after {expect.deadline_s} s")
    for s in signals:
        result.problems.append(f"never reached {s.when} (signal {s.name} not sent)")
    for f in faults:
        result.problems.append(f"never reached {f.when} ({f.action} not done)")
    if cancel is not None:
        result.problems.append(f"never reached {cancel} (cancel not sent)")
    result.problems += check_outcome(expect, result.status, view.context, view.reason)
    result.problems += check_steps(expected_steps, result.steps)
    if expect.children:
        children = watch.descendants()
        for flow, status in sorted(expect.children.items()):
            mine = [i for i in children if i.flow == flow]
            if not mine:
                result.problems.append(f"no child instance of {flow}")
            for inst in mine:
                if str(inst.status) != status:
                    result.problems.append(f"child {flow} is {inst.status}; expected {status}")
    if view.status.finished:
        # The database's clock, start to finish: the runner's polling adds nothing to it.
        took = view.updated_at_ms - view.created_at_ms
        if took < expect.min_elapsed_ms:
            result.problems.append(f"took {took} ms; expected at least {expect.min_elapsed_ms}")
        if expect.max_elapsed_ms is not None and took > expect.max_elapsed_ms:
            result.problems.append(f"took {took} ms; expected at most {expect.max_elapsed_ms}")
    if expect.retry_delays_ms:
        events = client.describe(root, events=True).events
        result.problems += check_retry_delays(expect.retry_delays_ms, events)
    if not view.status.finished:
        client.cancel(root, "conformance cleanup")
    reports: list[str] = []
    if session.options.orchestration:
        reports = _judge(session, run, watch, result)
    if result.problems and session.options.verbose:
        result.problems += _evidence(watch, t0, reports)
    return result


def _judge(session: _Session, run: Run, watch: _Watch, result: RunResult) -> list[str]:
    """Check how the worker drove the run; returns the root's reports, rendered."""
    from wiggle.conformance._activities import ACTIVITY_NAMES

    instances = {watch.root, *(i.instance_id for i in watch.descendants())}
    recorder = session.recorder
    deliveries = recorder.deliveries(instances)
    calls = recorder.calls({d.lease for d in deliveries})
    faults = {f.action for f in run.faults}
    refused = {(f.rpc, f.status) for f in run.server_faults if not f.lose_response}
    ctx = RunContext(
        graph_of=session.graphs.get,
        batch_size=BATCH_SIZE,
        activities=ACTIVITY_NAMES,
        terminated="term" in faults,
        disturbed=bool(faults or run.cancel or run.server_faults) or result.status != "COMPLETED",
        fallback=("AdvanceRun", "UNIMPLEMENTED") in refused,
        heartbeats_refused=any(rpc == "Heartbeat" for rpc, _ in refused),
    )
    result.problems += check_orchestration(deliveries, calls, ctx)
    result.problems += _faults_fired(session.mode, run, calls)
    mine = [d for d in deliveries if d.instance_id == watch.root]
    reports = render_reports(mine, recorder.calls({d.lease for d in mine}))
    expected = run.expect.reports.get(session.mode)
    if expected is not None:
        result.problems += check_reports(expected, reports)
    return reports


#: RPCs a worker does not use in a mode (without a fallback): a server fault on one cannot fire.
_UNUSED = {"SERVER": {"AdvanceRun"}, "LOCAL_SYNC": {"CompleteTask", "FailTask"}}
_UNUSED["LOCAL_ASYNC"] = _UNUSED["LOCAL_SYNC"]


def _faults_fired(mode: str, run: Run, calls: Sequence[Any]) -> list[str]:
    """A case's server fault that never fired tested nothing: say so."""
    if any(f.status == "UNIMPLEMENTED" for f in run.server_faults):
        return []  # the fallback changes which RPCs the worker uses
    fired = {c.rpc for c in calls if c.injected}
    return [
        f"the server fault on {f.rpc} never fired"
        for f in run.server_faults
        if f.rpc not in _UNUSED[mode] and f.rpc not in fired
    ]


def _evidence(watch: _Watch, t0: float, reports: Sequence[str] = ()) -> list[str]:
    """What happened, for a person reading a failure: trace lines, reports and the event log."""
    lines = [f"report: {r}" for r in reports]
    lines += [
        f"trace: {watch.key(line)} attempt {line.attempt}"
        for line in watch.lines()
        if watch.key(line) is not None
    ]
    view = watch.session.client.describe(watch.root, events=True)
    start = view.created_at_ms
    for e in view.events:
        detail = "" if e.detail is None else f" {show(e.detail, 160)}"
        lines.append(f"event +{e.at_ms - start}ms {e.kind} {e.node_id} #{e.attempt}{detail}")
    return lines


def _run_case(session: _Session, case: Case, versions: dict[str, str]) -> list[RunResult]:
    version = versions.get(case.id)
    if version is None:
        return [
            RunResult(case.id, r.index, session.mode, session.database, ["flow not registered"])
            for r in case.runs
        ]
    results = []
    for run in case.runs:
        try:
            results.append(_execute(session, case, run, version))
        except Exception as exc:  # one broken run must not stop the corpus; it is reported
            results.append(
                RunResult(
                    case.id,
                    run.index,
                    session.mode,
                    session.database,
                    [f"runner error: {type(exc).__name__}: {exc}"],
                )
            )
    return results


def _run_mode(
    session: _Session,
    cases: Sequence[Case],
    options: RunnerOptions,
    busy: threading.Lock,
    barrier: threading.Barrier,
) -> list[RunResult]:
    """One session: deploy, the plain cases many at once, then the others one at a time.

    `busy` is held for the busy part (deploying, the plain cases), and `barrier` holds every
    session's faulty cases back until all the busy parts are done: sessions running at once
    overlap only their faulty cases, which mostly wait, and never slow down a plain case whose
    timing is judged (a retry's backoff, a timer)."""
    arrived = False

    def arrive() -> None:
        nonlocal arrived
        if not arrived:
            arrived = True
            with contextlib.suppress(threading.BrokenBarrierError):
                barrier.wait()

    versions: dict[str, str] = {}
    results: list[RunResult] = []
    lock = threading.Lock()

    def report(batch: list[RunResult]) -> None:
        with lock:
            results.extend(batch)
            if options.on_result is not None:
                for r in batch:
                    options.on_result(r)

    # One worker for the session: starting and draining a process per case costs seconds each,
    # and the phases keep a kill from reaching any case but the one that asked for it.
    try:
        with session.worker_process("session"):
            _busy_part(session, cases, options, busy, versions, report)
            arrive()
            for case in [c for c in cases if c.has_faults and c.id in versions]:
                report(_run_case(session, case, versions))
    finally:
        arrive()  # a session that failed early must not hold the others back
    return results


def _busy_part(
    session: _Session,
    cases: Sequence[Case],
    options: RunnerOptions,
    busy: threading.Lock,
    versions: dict[str, str],
    report: Callable[[list[RunResult]], None],
) -> None:
    """Deploy every case's flows, then run the plain cases many at once."""
    with busy:
        for case in cases:
            try:
                versions[case.id] = session.deploy(case)
            except Exception as exc:  # a flow the server refuses fails its case only
                report(
                    [
                        RunResult(
                            case.id, r.index, session.mode, session.database, [f"deploy: {exc}"]
                        )
                        for r in case.runs
                    ]
                )
        plain = [c for c in cases if not c.has_faults and c.id in versions]
        if plain:
            with ThreadPoolExecutor(options.parallel) as pool:
                for batch in pool.map(lambda c: _run_case(session, c, versions), plain):
                    report(batch)


def run_corpus(cases: Sequence[Case], options: RunnerOptions) -> list[RunResult]:
    """Every case under every mode on every database. The sessions of one database (one per
    mode, each with its own database, server and workers) run at once: their busy parts one
    after another, then their faulty cases side by side. Those mostly wait, on leases to expire
    and timers to fire, one case after another, and the waits overlap."""
    results: list[RunResult] = []
    busy = threading.Lock()
    with tempfile.TemporaryDirectory(prefix="wiggle-conformance-") as tmp:
        for spec in options.databases:
            with fresh_databases(spec) as new_database:
                width = len(options.modes) if options.modes_at_once else 1
                barrier = threading.Barrier(width)
                label = database_label(spec)
                sessions = [(mode, new_database(), label, barrier) for mode in options.modes]

                def session_of(plan: tuple[str, str, str, threading.Barrier]) -> list[RunResult]:
                    mode, url, label, barrier = plan
                    session = _Session(url, mode, label, options, Path(tmp))
                    try:
                        return _run_mode(session, cases, options, busy, barrier)
                    finally:
                        session.close()

                with ThreadPoolExecutor(width, thread_name_prefix="conformance-mode") as pool:
                    for batch in pool.map(session_of, sessions):
                        results += batch
    return results
