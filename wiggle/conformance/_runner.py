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
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from wiggle.conformance._cases import Case, Run
from wiggle.conformance._check import (
    RunResult,
    check_outcome,
    check_reports,
    check_retry_delays,
    check_steps,
)
from wiggle.conformance._databases import database_label, fresh_databases
from wiggle.conformance._orchestration import RunContext, check_orchestration, render_reports
from wiggle.conformance._recorder import REPORTS, Call, Delivery
from wiggle.conformance._session import BATCH_SIZE, RunnerOptions, Session, Watch
from wiggle.conformance._spoiled import Landed, spoiled
from wiggle.conformance._worker_process import WorkerExited
from wiggle.graph import Graph, Task
from wiggle.jsonvalue import show
from wiggle.modes import MODES

__all__ = ["BATCH_SIZE", "MODES", "RunnerOptions", "run_corpus"]

#: How many times a run is tried when the machine, not the worker, spoiled it (_spoiled).
_TRIES = 3

#: How long the judge waits for the server to finish recording a call it is still serving.
_RECORDED_S = 10.0

#: How long the judge waits for the resend of a report whose answer was lost (a worker backs off
#: about 100 ms first; a final report's resend comes after the instance looks finished).
_RESENT_S = 5.0

#: How long to keep watching after an instance ended, to catch a step that runs too late (a
#: stale worker, a step after a cancel). Longer where faults or cancels make that likely.
_SETTLE_S = 0.05
_SETTLE_EVENTFUL_S = 0.3
#: Beyond a lease's end by the runner's clock (watch_leases): the server's clock, which ends it,
#: is read a little later than the runner's record of the renewal.
_LEASE_MARGIN_S = 0.5

#: The longest a run waits for its end in one call while nothing else is due (`_wait_for_end`).
_WAIT_SLICE_S = 1.0


def _send(client: Any, root: str, signal: Any, problems: list[str]) -> None:
    """Send one signal; one the case expects refused must be refused with its words. One that
    came after the instance ended is a problem of the run (judged with the rest), not an error
    of the runner."""
    from wiggle.errors import InstanceNotRunning, InvalidRequest

    try:
        client.signal(root, signal.name, signal.payload)
    except InstanceNotRunning as exc:
        problems.append(f"signal {signal.name} came too late: {exc}")
        return
    except InvalidRequest as exc:
        if signal.refused is None:
            raise
        if signal.refused not in str(exc):
            problems.append(f"signal {signal.name} refused as {exc}; expected {signal.refused!r}")
        return
    if signal.refused is not None:
        problems.append(f"signal {signal.name} accepted; expected a refusal ({signal.refused!r})")


def _execute(session: Session, case: Case, run: Run, version: str) -> RunResult:
    """One run, tried again (up to _TRIES in all) while it fails and the record shows that the
    machine spoiled it (_spoiled): the verdict never hangs on how loaded the machine was."""
    spoils: list[str] = []
    for _ in range(_TRIES):
        result = _execute_once(session, case, run, version)
        if result.spoiled is None:
            break
        spoils.append(result.spoiled)
    else:
        result.problems.append(
            f"not judged: all {_TRIES} tries were spoiled (by the machine or the worker)"
        )
    result.notes += [f"try {i} spoiled: {why}" for i, why in enumerate(spoils, 1)]
    return result


def _execute_once(session: Session, case: Case, run: Run, version: str) -> RunResult:
    if run.transport == "tls":
        with session.tls_worker(f"{case.id}-tls"):
            result = _execute_run(session, case, run, version)
        if session.embedded:
            result.notes.append("in process: the embedded worker has no transport, TLS unused")
        return result
    session.recorder.arm(run.server_faults)
    try:
        return _execute_run(session, case, run, version)
    finally:
        session.recorder.disarm()
        if _lasting(run):
            session.restart()


def _lasting(run: Run) -> bool:
    """Whether the run's server faults may outlast it in the worker, which the next case then
    needs fresh. While a fault on a report RPC is armed the server refuses ReportBatch with
    UNIMPLEMENTED, which turns a worker's batching off for good; AdvanceRun UNIMPLEMENTED makes
    it run SERVER steps for good; a held poll answer waits for the worker that made the call.
    A refused heartbeat or a batch's lost answer ends with the call it hit, and the judge has
    waited for the resends: a new worker after them would only cost its start (a JVM's is
    seconds)."""
    return any(f.hold or f.rpc in REPORTS for f in run.server_faults)


def _execute_run(session: Session, case: Case, run: Run, version: str) -> RunResult:
    from wiggle.errors import InstanceNotRunning, WiggleError

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

    watch = Watch(session, case, root, mark)
    signals = list(run.signals)
    faults = list(run.faults)
    cancel = run.cancel
    landed: list[Landed] = []
    deadline = t0 + expect.deadline_s
    delay = 0.03
    while True:
        session.trace.refresh()
        watch.forget_tokens()
        for fault in [f for f in faults if watch.reached(f.when)]:
            faults.remove(fault)
            landed += [x for x in [session.inject(fault)] if x is not None]
            watch.forget_tokens()
        while signals and watch.reached(signals[0].when):
            signal = signals.pop(0)
            _send(client, root, signal, result.problems)
            # The next signal's moment must be judged on the state after this one.
            watch.forget_tokens()
        if cancel is not None and watch.reached(cancel):
            # Noted before the call: what was reported or traced by then preceded the cancel.
            sent = session.landed("cancel", cancel)
            try:
                client.cancel(root, run.cancel_reason)
            except InstanceNotRunning as exc:
                result.problems.append(f"the cancel came too late: {exc}")
            finally:
                landed.append(_arrived(session, sent, root))
            cancel = None
        counts, view = look(watch, client, root)
        pending = bool(signals or faults or cancel is not None)
        if view.status.finished:
            break
        now = time.monotonic()
        if expect.status == "RUNNING" and not pending and now - t0 > 0.5:
            # Parked: the steps have run and no token is leased (its report is not in yet).
            parked = not any(str(t.state) == "LEASED" for t in view.tokens)
            if parked and all(counts.get(k, 0) >= c.min for k, c in expected_steps.items()):
                break
        if now > deadline:
            break
        died = session.worker_died()
        if died is not None:
            result.problems.append(died)
            break
        if pending or expect.status == "RUNNING":
            time.sleep(delay)
            # Polls are what loads the server (in this process) most: keep them sparse once
            # nothing is due, frequent while a moment is pending so it is caught promptly.
            delay = min(delay * 1.25, 0.05 if pending else 0.25)
        else:
            # Nothing left to do but see the end: one long poll, which the server answers the
            # moment the instance ends, instead of a describe every quarter of a second (they
            # were a quarter of the runner's CPU). In slices, so a dead worker is noticed.
            _wait_for_end(client, root, min(_WAIT_SLICE_S, max(deadline - now, 0.0)))

    if expect.watch_leases:
        _watch_leases_out(session, watch, version, deadline)
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
    if expect.retry_delays_ms:
        events = client.describe(root, events=True).events
        result.problems += check_retry_delays(expect.retry_delays_ms, events)
    if not view.status.finished:
        client.cancel(root, "conformance cleanup")
    reports: list[str] = []
    if session.options.orchestration:
        reports = _judge(session, run, watch, result)
    if result.problems:
        result.spoiled = _spoiled(session, watch, landed, version)
    if result.problems and session.options.verbose:
        result.problems += _evidence(watch, t0, reports)
    return result


def _arrived(session: Session, sent: Landed, root: str) -> Landed:
    """The cancel `sent`, with when the server began serving the attempt of it that took
    effect: the last one, since the client sends it again only after an UNAVAILABLE answer.
    The recorder notes each attempt before answering it, so the call's return finds them."""
    attempts = [c for c in session.recorder.cancels(root) if c.arrived >= sent.at]
    return replace(sent, arrived=attempts[-1].arrived) if attempts else sent


def _wait_for_end(client: Any, root: str, wait_s: float) -> None:
    """Until the instance ends or `wait_s` has passed; a server with no long poll to spare
    (Unavailable) makes it a short sleep instead."""
    from wiggle.errors import Unavailable

    try:
        client.wait_once(root, wait_s)
    except Unavailable:
        time.sleep(min(wait_s, 0.25))


def look(watch: Watch, client: Any, root: str) -> tuple[dict[str, int], Any]:
    """The steps the trace shows and the instance's view, in that order. The trace is shared
    by the cases running at once, and any of them may read new lines into it at any moment: a
    count taken after the view could include a step that started after the view was read, and
    a view that shows its token not yet leased would pass for one parked after that step."""
    counts = watch.counts()
    return counts, client.describe(root)


def _watch_leases_out(session: Session, watch: Watch, version: str, deadline: float) -> None:
    """Wait until every lease handed out for the run has ended, or the case's deadline: ended by
    a final report or a release sent under it (whatever its answer: nothing more can run under
    it), or by its time running out (_lease_end). A worker that goes on under a lease it should
    count as lost can only start a step while a quarter of the lease is left, so a step run too
    late has started by then, however slowly a loaded machine let it get there: a fixed settle
    time could end first (it did, once)."""
    graph = session.graphs.get(version)
    recorder = session.recorder
    instances = {watch.root, *(i.instance_id for i in watch.descendants())}
    while True:
        seen = recorder.recorded()
        deliveries = recorder.deliveries(instances)
        calls = recorder.calls({d.lease for d in deliveries})
        open_until = 0.0
        for d in deliveries:
            mine = [c for c in calls if c.lease == d.lease]
            if any(c.rpc in REPORTS and (c.rpc != "AdvanceRun" or c.final) for c in mine):
                continue
            open_until = max(open_until, _lease_end(d, mine, graph) + _LEASE_MARGIN_S)
        now = time.monotonic()
        if now >= min(open_until, deadline):
            return
        # Until the lease runs out, or a call (a report ending it, a renewal) comes first.
        recorder.wait_more(seen, min(open_until, deadline) - now)


def _lease_end(delivery: Delivery, calls: Sequence[Call], graph: Graph | None) -> float:
    """When the lease of `delivery` runs out, by the runner's clock, given its `calls`: the
    server renews a lease by the task's timeout, a heartbeat naming a step of a local run by
    that step's, and an applied AdvanceRun by its next step's (taken as the flow's longest); a
    heartbeat answered with the instance ended renews nothing."""
    tasks = [n for n in graph.nodes.values() if isinstance(n, Task)] if graph is not None else []
    longest_ms = max([delivery.timeout_ms, *(n.timeout_ms for n in tasks)])
    renewed = any(c.ok and c.rpc == "AdvanceRun" for c in calls)
    base_ms = longest_ms if renewed else delivery.timeout_ms
    ends = [delivery.at + base_ms / 1000]
    for c in calls:
        if c.ok and c.rpc == "AdvanceRun":
            ends.append(c.at + longest_ms / 1000)
        elif c.ok and c.rpc == "Heartbeat" and c.instance_status == "RUNNING":
            node = graph.nodes.get(c.node_id) if graph is not None and c.node_id else None
            length_ms = node.timeout_ms if isinstance(node, Task) else base_ms
            ends.append(c.at + length_ms / 1000)
    return max(ends)


def _spoiled(session: Session, watch: Watch, landed: Sequence[Landed], version: str) -> str | None:
    """Whether the machine spoiled the run (_spoiled), from the record of it."""
    graph = session.graphs.get(version)
    if graph is None:
        return None
    instances = [watch.root, *(i.instance_id for i in watch.descendants())]
    deliveries = session.recorder.deliveries(set(instances))
    session.recorder.wait_recorded({d.lease for d in deliveries}, _RECORDED_S)
    calls = session.recorder.calls({d.lease for d in deliveries})
    # The events' times are the database's wall clock, the recorder's the monotonic one.
    offset = time.time() - time.monotonic()
    lapses = [
        e.at_ms / 1000 - offset
        for i in instances
        for e in session.client.describe(i, events=True).events
        if e.kind == "lease_expired"
    ]
    return spoiled(landed, graph, watch.root, watch.lines(), deliveries, calls, lapses)


def _judge(session: Session, run: Run, watch: Watch, result: RunResult) -> list[str]:
    """Check how the worker drove the run; returns the root's reports, rendered."""
    from wiggle.conformance._activities import ACTIVITY_NAMES

    instances = {watch.root, *(i.instance_id for i in watch.descendants())}
    recorder = session.recorder
    deliveries = recorder.deliveries(instances)
    leases = {d.lease for d in deliveries}
    if any(f.lose_response for f in run.server_faults):
        recorder.wait_resent(leases, _RESENT_S)
    recorder.wait_recorded(leases, _RECORDED_S)
    calls = recorder.calls(leases)
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
        resends_due=not (run.faults or run.cancel),
    )
    result.problems += check_orchestration(deliveries, calls, ctx)
    unfired = _faults_unfired(session.mode, run, calls)
    if recorder.polls_held():
        unfired.discard("PollTasks")
    # Batching is a worker's option: a fault on ReportBatch tests nothing in a worker without it.
    result.problems += [f"the server fault on {rpc} never fired" for rpc in unfired - _OPTIONAL]
    result.notes += [
        f"the worker sent no {rpc}: its fault did not apply" for rpc in unfired & _OPTIONAL
    ]
    mine = [d for d in deliveries if d.instance_id == watch.root]
    reports = render_reports(mine, recorder.calls({d.lease for d in mine}))
    expected = run.expect.reports.get(session.mode)
    if expected is not None:
        result.problems += check_reports(expected, reports)
    return reports


#: RPCs a worker does not use in a mode (without a fallback): a server fault on one cannot fire.
_UNUSED = {"SERVER": {"AdvanceRun"}, "LOCAL_SYNC": {"CompleteTask", "FailTask"}}
_UNUSED["LOCAL_ASYNC"] = _UNUSED["LOCAL_SYNC"]
#: RPCs a conforming worker may do without (docs/worker-protocol.md, "Batched reports").
_OPTIONAL = frozenset({"ReportBatch"})


def _faults_unfired(mode: str, run: Run, calls: Sequence[Any]) -> set[str]:
    """The RPCs of the case's server faults that never fired: such a fault tested nothing."""
    if any(f.status == "UNIMPLEMENTED" for f in run.server_faults):
        return set()  # the fallback changes which RPCs the worker uses
    fired = {"ReportBatch" if c.batched else c.rpc for c in calls if c.injected}
    return {f.rpc for f in run.server_faults if f.rpc not in _UNUSED[mode] and f.rpc not in fired}


def _evidence(watch: Watch, t0: float, reports: Sequence[str] = ()) -> list[str]:
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


def _run_case(session: Session, case: Case, versions: dict[str, str]) -> list[RunResult]:
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
    session: Session,
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
    except WorkerExited as exc:
        # Every case not yet judged fails with the reason, and the other sessions go on.
        done = {r.case_id for r in results}
        report(
            [
                RunResult(c.id, 0, session.mode, session.database, problems=[str(exc)])
                for c in cases
                if c.id not in done
            ]
        )
    finally:
        arrive()  # a session that failed early must not hold the others back
    return results


def _busy_part(
    session: Session,
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
        # Longest first: a long case started last would hold the phase up on its own.
        plain = sorted(
            (c for c in cases if not c.has_faults and c.id in versions),
            key=_expected_ms,
            reverse=True,
        )
        if plain:
            with ThreadPoolExecutor(options.parallel) as pool:
                for batch in pool.map(lambda c: _run_case(session, c, versions), plain):
                    report(batch)


def _expected_ms(case: Case) -> int:
    """Roughly how long a case takes: its longest hold, settle or minimum time, run by run."""
    total = 0
    for run in case.runs:
        hold = run.input.get("hold_ms", 0) if isinstance(run.input, dict) else 0
        settle = run.expect.settle_ms or 0
        total += max(hold if isinstance(hold, int) else 0, settle, run.expect.min_elapsed_ms)
    return total


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
                    session = Session(url, mode, label, options, Path(tmp))
                    try:
                        return _run_mode(session, cases, options, busy, barrier)
                    finally:
                        session.close()

                with ThreadPoolExecutor(width, thread_name_prefix="conformance-mode") as pool:
                    for batch in pool.map(session_of, sessions):
                        results += batch
    return results
