"""Judging how a worker drove a run, from the calls the runner's server recorded.

Two checks. `check_orchestration` holds every run to the protocol (docs/worker-protocol.md):
every report carries its `seq` (1, then one past the last the server applied under the lease),
and a report whose answer was lost is resent unchanged with the same `seq`; no result over the
payload or depth limit is sent (the worker fails that step itself); SERVER tasks are one step
each, reported with CompleteTask / FailTask; a LOCAL task is a local run reported with
AdvanceRun, one step per call in LOCAL_SYNC, in LOCAL_ASYNC flushed exactly at checkpoints, full
batches and the request size limit; every final call names the reason the handback rule (or the
worker's state) gives; predicates report booleans as `predicate`. And
`render_reports` writes a run's reports in the notation the cases' `reports` expectations use
(the same as spec/conformance/localrun/), so a case can state them exactly, per mode.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

import orjson

from wiggle._limits import MAX_JSON_DEPTH
from wiggle.conformance._recorder import REPORTS, Call, Delivery, StepSeen
from wiggle.graph import Condition, Graph, Predicate, SetValues, Task
from wiggle.localrun import REQUEST_HEADROOM, RUNTIME_HANDBACKS, default_max_request_bytes
from wiggle.traversal import Handback, Move, advance

__all__ = ["RunContext", "check_orchestration", "logical_reports", "render_reports"]

#: Slack on the size rule: the fields that differ between the call as sent and as estimated.
_SIZE_SLACK = 64


@dataclass(frozen=True)
class RunContext:
    """What the judge needs to know about a run besides the calls."""

    graph_of: Callable[[str], Graph | None]  # by version
    batch_size: int
    activities: Collection[str]  # what the worker under test has registered
    terminated: bool = False  # a graceful stop (SIGTERM) hit the run: `shutdown` is expected
    disturbed: bool = False  # a kill, pause, cancel or server fault: runs may end unreported
    fallback: bool = False  # the server answered AdvanceRun UNIMPLEMENTED in this session
    heartbeats_refused: bool = False  # the case refused heartbeats: `lease_budget` is expected
    #: Nothing but the server's faults disturbed the run (no kill, pause, drain or cancel), so a
    #: report whose answer was lost must have been resent.
    resends_due: bool = True


def logical_reports(calls: Sequence[Call]) -> list[Call]:
    """The reports among `calls`, in order, each once: a resend (same lease, RPC and seq) of a
    report is left out once one copy was applied; until then the latest copy stands for it. (A
    report after a refused one reuses its seq, but it is another RPC: a ReleaseTask, say, or the
    CompleteTask of an UNIMPLEMENTED fallback.)"""
    out: list[Call] = []
    index: dict[tuple[str, str, int], int] = {}
    for c in calls:
        if c.rpc not in REPORTS:
            continue
        key = (c.lease, c.rpc, c.seq)
        if c.seq > 0 and key in index:
            first = out[index[key]]
            if not first.ok:
                out[index[key]] = c
            continue
        if c.seq > 0:
            index[key] = len(out)
        out.append(c)
    return out


def _step_text(step: StepSeen) -> str:
    if step.kind == "predicate":
        return f"{step.node_id}={'true' if step.predicate else 'false'}"
    if step.kind == "failure":
        return f"{step.node_id}!"
    return step.node_id


def render(call: Call, node_id: str) -> str:
    """`advance a p=true c! / reason`, `complete a`, `fail a`, `release a / reason`."""
    if call.rpc == "AdvanceRun":
        text = " ".join(["advance", *(_step_text(s) for s in call.steps)])
        return f"{text} / {call.reason}" if call.final else text
    if call.rpc == "ReleaseTask":
        return f"release {node_id} / {call.reason}"
    return f"{'complete' if call.rpc == 'CompleteTask' else 'fail'} {node_id}"


def render_reports(deliveries: Sequence[Delivery], calls: Sequence[Call]) -> list[str]:
    node_of = {d.lease: d.node_id for d in deliveries}
    return [render(c, node_of.get(c.lease, "?")) for c in logical_reports(calls)]


def check_orchestration(
    deliveries: Sequence[Delivery], calls: Sequence[Call], ctx: RunContext
) -> list[str]:
    """Every way the recorded calls depart from the protocol, as sentences."""
    problems: list[str] = []
    by_lease: dict[str, list[Call]] = {}
    for c in calls:
        by_lease.setdefault(c.lease, []).append(c)
    for d in sorted(deliveries, key=lambda d: d.at):
        graph = ctx.graph_of(d.version)
        if graph is None:
            continue
        found = _check_task(d, by_lease.get(d.lease, []), graph, ctx)
        problems += [f"task at {d.node_id} ({d.mode}): {p}" for p in found]
    return problems


def _resends_differ(calls: Sequence[Call]) -> list[str]:
    """A resent report (same lease, RPC and seq) must be the report it repeats, unchanged."""
    first: dict[tuple[str, str, int], Call] = {}
    problems = []
    for c in calls:
        if c.rpc not in REPORTS or c.seq <= 0:
            continue
        seen = first.setdefault((c.lease, c.rpc, c.seq), c)
        if seen is not c and (seen.steps, seen.final, seen.reason) != (c.steps, c.final, c.reason):
            problems.append(f"{c.rpc} seq {c.seq} was resent with other content")
    return problems


def _numbering(calls: Sequence[Call], resends_due: bool) -> list[str]:
    """Report identity (docs/worker-protocol.md, "Reports"): each report carries `seq` = one
    past the reports the server acknowledged under the lease (answered without an error: a
    refused one was not applied, so the next reuses its seq); a report whose answer was lost is
    resent next, unchanged, same seq."""
    reports = [c for c in calls if c.rpc in REPORTS]
    problems: list[str] = []
    acked = 0
    sent: set[tuple[str, int]] = set()
    for i, c in enumerate(reports):
        if c.seq <= 0:
            if not any(p.startswith("reports without seq") for p in problems):
                problems.append(
                    f"reports without seq ({c.rpc} seq {c.seq}): every report carries its "
                    "number under the lease, from 1"
                )
        elif c.seq > acked + 1 or (c.seq <= acked and (c.rpc, c.seq) not in sent):
            problems.append(
                f"{c.rpc} sent with seq {c.seq}; the server had acknowledged {acked} report(s) "
                f"under the lease (a lost answer acknowledges none), so a new report is seq "
                f"{acked + 1} and a resend repeats its own"
            )
        sent.add((c.rpc, c.seq))
        if c.code == "OK" and not c.injected:
            acked = max(acked, c.seq)
        if c.injected != "lost":
            continue
        following = reports[i + 1] if i + 1 < len(reports) else None
        if following is None:
            if resends_due and not _lease_ended_after(calls, c):
                problems.append(
                    f"the answer to {c.rpc} seq {c.seq} was lost and it was never resent (a "
                    "report of unknown fate is resent unchanged, same seq, while the lease lasts)"
                )
        elif (following.rpc, following.seq) != (c.rpc, c.seq):
            problems.append(
                f"the answer to {c.rpc} seq {c.seq} was lost; the worker then sent "
                f"{following.rpc} seq {following.seq} instead of resending it unchanged"
            )
    return problems


def _lease_ended_after(calls: Sequence[Call], lost: Call) -> bool:
    """Whether the server told the worker, after `lost` was sent, that the lease is over: a
    Heartbeat of that lease answered with an error, or saying the instance no longer runs. A
    lost final report may have ended the instance itself, and a heartbeat in the resend's
    back-off then says so, and a worker that has learnt its lease is gone reports on it no
    more, a final report excepted, which it MAY resend (docs/worker-protocol.md, "A lost
    lease")."""
    return any(
        h.rpc == "Heartbeat"
        and h.lease == lost.lease
        and h.order > lost.order
        and (h.code != "OK" or h.instance_status not in ("", "RUNNING"))
        for h in calls
    )


def _over_limits(d: Delivery, reports: Sequence[Call]) -> list[str]:
    """Results a worker must have failed itself instead of sending (docs/worker-protocol.md,
    "Limits")."""
    problems = []
    for c in reports:
        for step in c.steps:
            where = f"{c.rpc} of {step.node_id or d.node_id}"
            if 0 < d.max_payload_bytes < step.context_bytes:
                problems.append(
                    f"{where} carried a {step.context_bytes}-byte result, over max_payload_bytes "
                    f"({d.max_payload_bytes}): the worker fails such a step itself, non-retryably"
                )
            if step.too_deep:
                problems.append(
                    f"{where} carried a result nested deeper than {MAX_JSON_DEPTH} levels: the "
                    "worker fails such a step itself, non-retryably"
                )
    return problems


def _check_task(d: Delivery, calls: Sequence[Call], graph: Graph, ctx: RunContext) -> list[str]:
    reports = logical_reports(calls)
    problems = _resends_differ(calls)
    problems += _numbering(calls, ctx.resends_due)
    problems += _over_limits(d, reports)
    problems += [
        f"{c.rpc} refused with {c.error_code or c.code}"
        for c in reports
        if (c.code == "INVALID_ARGUMENT" or c.error_code == "REPORT_OUT_OF_ORDER")
        and not c.injected  # a refusal the case asked for says nothing about the worker
    ]
    if not reports:
        if not ctx.disturbed:
            problems.append("never reported (no CompleteTask, FailTask, AdvanceRun or ReleaseTask)")
        return problems
    if d.mode == "SERVER":
        if any(c.rpc == "AdvanceRun" for c in reports):
            problems.append("a SERVER task was reported with AdvanceRun: SERVER tasks are one step")
        applied = [c for c in reports if c.rpc in ("CompleteTask", "FailTask") and c.ok]
        if len(applied) > 1:
            problems.append(f"reported {len(applied)} times (one step, one report)")
        return problems
    if ctx.fallback:
        return problems  # after UNIMPLEMENTED the worker runs LOCAL tasks as SERVER steps
    singles = [c.rpc for c in reports if c.rpc in ("CompleteTask", "FailTask")]
    if singles:
        problems.append(
            f"reported with {singles[0]}: a {d.mode} task is a local run, reported with "
            "AdvanceRun (the worker did not chain)"
        )
        return problems
    return problems + _Run(d, calls, graph, ctx).check(
        [c for c in reports if c.rpc == "AdvanceRun"]
    )


class _Run:
    """One local run: its AdvanceRun calls checked against the local-run loop."""

    def __init__(self, d: Delivery, calls: Sequence[Call], graph: Graph, ctx: RunContext) -> None:
        self.d = d
        self.calls = calls  # heartbeats included: they renew the lease
        self.graph = graph
        self.ctx = ctx
        self.counts: Mapping[str, int] = orjson.loads(d.loop_counts) if d.loop_counts else {}
        self.limit = d.max_request_bytes or default_max_request_bytes(4 * 1024 * 1024)
        self.problems: list[str] = []

    def check(self, advances: Sequence[Call]) -> list[str]:
        for i, call in enumerate(advances):
            if i > 0 and advances[i - 1].final:
                self.problems.append("an AdvanceRun after the run's final one")
                break
            following = advances[i + 1] if i + 1 < len(advances) else None
            self._call(call, following)
        return self.problems

    def _call(self, call: Call, following: Call | None) -> None:
        steps, mode = call.steps, self.d.mode
        if not steps:
            if not call.final:
                self.problems.append("an empty non-final AdvanceRun")
            return
        # Expression results travel with the worker step before them and are not counted.
        worker = [s for s in steps if not self._expression(s.node_id)]
        if mode == "LOCAL_SYNC" and len(worker) > 1:
            names = " ".join(s.node_id for s in steps)
            self.problems.append(
                f"LOCAL_SYNC sent {len(worker)} steps in one AdvanceRun ({names}): it reports "
                "every step before the next one runs"
            )
        if mode == "LOCAL_ASYNC" and len(worker) > self.ctx.batch_size:
            self.problems.append(
                f"{len(worker)} steps in one AdvanceRun; the batch size is {self.ctx.batch_size}"
            )
        for i, step in enumerate(steps[:-1]):
            self._inside(step, any(not self._expression(s.node_id) for s in steps[i + 1 :]))
        last = steps[-1]
        failed, move = self._follow(last)
        if call.final:
            self._final(call, last, failed, move)
            return
        if failed:
            self.problems.append(f"{last.node_id} failed, but the AdvanceRun was not final")
        elif move is not None and move.handback is not None:
            self.problems.append(
                f"sent final=false after {last.node_id}, where the run hands back ({move.handback})"
            )
        elif move is not None and self._expression(move.next_node or ""):
            self.problems.append(
                f"flushed after {last.node_id} in front of {move.next_node}: an expression node "
                "is evaluated before the flush and travels with the step before it"
            )
        elif (
            mode == "LOCAL_ASYNC"
            and self._flush_reason(worker[-1] if worker else last, len(worker), call, following)
            is None
        ):
            self.problems.append(
                f"flushed after {last.node_id} ({len(steps)} steps): not a checkpoint, the batch "
                f"was not full ({self.ctx.batch_size}) and the next result fit"
            )
        if following is None and call.ok and call.keep_going and not self.ctx.disturbed:
            self.problems.append(
                f"stopped after a non-final AdvanceRun at {last.node_id} without handing back "
                "(keep_going was true)"
            )

    def _expression(self, node_id: str) -> bool:
        return isinstance(self.graph.nodes.get(node_id), Condition | SetValues)

    def _inside(self, step: StepSeen, worker_step_follows: bool) -> None:
        """A step with more steps after it in the same call: the run went on from it."""
        failed, move = self._follow(step)
        node = self.graph.nodes.get(step.node_id)
        if failed:
            self.problems.append(f"{step.node_id} failed, but the run went on in the same batch")
        elif move is not None and move.handback is not None:
            self.problems.append(
                f"chained past {step.node_id}, where the run hands back ({move.handback})"
            )
        elif (
            self.d.mode == "LOCAL_ASYNC"
            and isinstance(node, Task)
            and node.checkpoint
            and worker_step_follows
        ):
            self.problems.append(
                f"checkpoint {step.node_id} was not flushed before the next step ran"
            )

    def _follow(self, step: StepSeen) -> tuple[bool, Move | None]:
        """(whether the step failed, the handback rule's move after it); updates loop counts."""
        node = self.graph.nodes.get(step.node_id)
        value: bool | None = None
        if step.kind in ("failure", "none"):
            return True, None
        if isinstance(node, Predicate | Condition):
            if step.kind == "predicate":
                value = step.predicate
            elif step.context_bool is not None:
                self.problems.append(
                    f"predicate {step.node_id}: its boolean was sent as a context; a boolean "
                    "goes in `predicate`"
                )
                value = step.context_bool  # the server follows it all the same
            else:
                return True, None  # not a boolean: the server fails the step
        try:
            move = advance(
                self.graph,
                step.node_id,
                self.d.queues,
                predicate_value=value,
                loop_counts=self.counts,
            )
        except ValueError:
            return False, None  # not a worker step: the server refuses it (WRONG_PATH)
        self.counts = move.loop_counts
        return False, move

    def _final(self, call: Call, last: StepSeen, failed: bool, move: Move | None) -> None:
        reason = call.reason
        if failed:
            expected = Handback.STEP_FAILED.value
        elif move is None:
            return
        elif move.handback is not None:
            expected = move.handback.value
        else:
            assert move.next_node is not None
            self._runtime(call, last, move.next_node)
            return
        if reason != expected:
            self.problems.append(
                f"handed back after {last.node_id} with reason {reason!r}; expected {expected!r}"
            )

    def _runtime(self, call: Call, last: StepSeen, next_node: str) -> None:
        """A final call where the graph lets the run go on: only the worker's state may stop it."""
        reason, ctx = call.reason, self.ctx
        node = self.graph.nodes[next_node]
        why = ""
        if reason not in RUNTIME_HANDBACKS:
            why = f"the run could go on to {next_node}"
        elif reason == "shutdown" and not ctx.terminated:
            why = "nothing stopped the worker"
        elif reason == "lease_budget" and not self._lease_was_low(call, last):
            why = "heartbeats kept the lease"
        elif reason == "unknown_activity" and isinstance(node, Condition | SetValues):
            why = f"{next_node} needs no activity"
        elif reason == "unknown_activity" and getattr(node, "activity", "") in ctx.activities:
            why = f"the worker has {getattr(node, 'activity', '')}"
        if why:
            self.problems.append(
                f"handed back after {last.node_id} with reason {reason!r}, but {why}"
            )

    def _lease_was_low(self, call: Call, last: StepSeen) -> bool:
        """Whether `lease_budget` is plausible: heartbeats were refused, the run was disturbed,
        or half a lease (the shorter of the task's timeout and the last step's: a worker that
        does not name its step in heartbeats keeps the task's) had passed since the lease was
        last renewed, or between that renewal and the one before it. In the second case the
        worker was held up (a heartbeat comes every third of a lease), and when it went on, the
        renewal it then sent may still have been on its way back as it decided: a starved
        worker once handed back so, correctly, 0.2 s after a renewal it had not yet heard."""
        if self.ctx.heartbeats_refused or self.ctx.disturbed:
            return True
        renewals = [self.d.at]
        for c in self.calls:
            if c.order < call.order and c.code == "OK" and (c.rpc == "Heartbeat" or not c.final):
                renewals.append(c.at)
        renewals.sort()
        node = self.graph.nodes.get(last.node_id)
        timeout_ms = min(getattr(node, "timeout_ms", 0) or self.d.timeout_ms, self.d.timeout_ms)
        half_s = timeout_ms / 2000
        if call.at - renewals[-1] >= half_s:
            return True
        return len(renewals) > 1 and renewals[-1] - renewals[-2] >= half_s

    def _flush_reason(
        self, last: StepSeen, buffered: int, call: Call, following: Call | None
    ) -> str | None:
        node = self.graph.nodes.get(last.node_id)
        if isinstance(node, Task) and node.checkpoint:
            return "checkpoint"
        if buffered >= self.ctx.batch_size:
            return "batch_full"
        if following is not None and following.steps:
            size = call.request_bytes + following.steps[0].entry_bytes
            if size > self.limit - REQUEST_HEADROOM - _SIZE_SLACK:
                return "size"
        return None
