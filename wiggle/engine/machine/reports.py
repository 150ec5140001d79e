"""One worker report's rules: who may send it, whether it is current, resent or out of
order, what it becomes (a run of step outcomes, see steps), and its answer; and a batch of
reports applied in one transaction (group commit's unit of work).

All the batch's tasks are read in one statement that also locks their root instances (in root
id order, so two batches never wait on each other in a cycle, see locking); each report is then
checked and applied in memory, in arrival order, through one shared identity map (a report on a
token that an earlier report of the batch moved sees it moved); one statement writes every token
and event.

A report is refused (PermissionDenied, StaleLease, WrongPath, ReportOutOfOrder) before it
changes anything, so a refused report never spoils its batch. Anything else that goes wrong
aborts the whole batch, and the engine applies its reports one transaction each
(`_run_reports`, see wiggle.engine._engine.Engine).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from wiggle.errors import ReportOutOfOrder, StaleLease, WiggleError
from wiggle.graph import Predicate, Task

from ..model.types import (
    AdvanceResult,
    InstanceStatus,
    Json,
    Report,
    ReportKind,
    StepOutcome,
    TokenState,
)
from .eager import lease_ready, next_lease, reissue
from .locking import lock_tasks
from .steps import apply_plan, plan_steps
from .tx import Inst, Tok, Tx

__all__ = ["apply_reports", "fence_lease", "record_seq", "resent", "server_outcome"]


def apply_reports(tx: Tx, reports: Sequence[Report]) -> list[AdvanceResult | WiggleError]:
    """Apply `reports` in order; each gets its answer or the error that refused it."""
    locked = lock_tasks(tx, [r.task_id for r in reports])
    out: list[AdvanceResult | WiggleError] = []
    for report in reports:
        try:
            out.append(apply_report(tx, report, locked.get(report.task_id)))
        except WiggleError as exc:  # refused before anything changed
            out.append(exc)
    return out


def apply_report(tx: Tx, r: Report, got: tuple[Tok, Inst] | None) -> AdvanceResult:
    tok, inst = got if got is not None else (None, None)
    refuse_unless_granted(r, tok, inst)
    if resent(tok, inst, r.task_id, r.lease, r.seq):
        assert tok is not None and inst is not None
        again = _answer_again(tx, inst, tok, r.lease)
        if r.next is not None:
            again = replace(again, next_task=reissue(tx, inst, r.lease))
        return again
    if not refuse_unless_current(tok, inst, r.task_id, r.lease):
        assert inst is not None
        return AdvanceResult(inst.status, 0, False, tx.now)
    assert tok is not None and inst is not None
    steps = _steps_of(r, tok, inst)
    plan = plan_steps(inst, tok, steps)  # WrongPath here: nothing changed yet
    # From here on the report is applied whole.
    fence_lease(tok, r.lease)
    reason = None if r.kind in (ReportKind.COMPLETE, ReportKind.FAIL) else r.reason
    if r.kind is ReportKind.RELEASE:
        reason = r.reason or "released"
    result = apply_plan(tx, inst, tok, plan, steps, final=r.final, reason=reason)
    record_seq(tok, r.lease, r.seq)
    tx.save(tok)
    next_task = None
    if r.next is not None and inst.status is InstanceStatus.RUNNING:
        next_task = lease_ready(tx, inst, r.next, lease=next_lease(r.lease))
    return replace(result, server_now_ms=tx.now, next_task=next_task)


def _steps_of(r: Report, tok: Tok, inst: Inst) -> Sequence[StepOutcome]:
    if r.kind is ReportKind.COMPLETE:
        return [server_outcome(tok, inst, r.result)]
    if r.kind is ReportKind.FAIL:
        assert r.failure is not None
        return [StepOutcome(tok.node_id, failure=r.failure)]
    if r.kind is ReportKind.RELEASE:
        return ()
    return r.steps


def _answer_again(tx: Tx, inst: Inst, tok: Tok, lease: str) -> AdvanceResult:
    """The answer to a report that was applied already, from the state it left behind."""
    if (
        inst.status is InstanceStatus.RUNNING
        and tok.state is TokenState.LEASED
        and tok.lease == lease
    ):
        return AdvanceResult(
            inst.status, tok.lease_expires_at_ms or 0, True, tx.now, duplicate=True
        )
    return AdvanceResult(inst.status, 0, False, tx.now, duplicate=True)


def fence_lease(tok: Tok, lease: str) -> None:
    """The lease (and the node it was issued at) must still hold in the token's UPDATE."""
    tok.fence = {"lease": lease, "state": TokenState.LEASED.value, "node_id": tok.node_id}


def server_outcome(tok: Tok, inst: Inst, result: Json) -> StepOutcome:
    """CompleteTask's single result as a step (a predicate's result is its boolean)."""
    node = inst.graph.nodes[tok.node_id]
    if isinstance(node, Predicate):
        if isinstance(result, bool):
            return StepOutcome(tok.node_id, predicate=result)
        return StepOutcome(tok.node_id, context=result)  # plan_steps turns it into a failure
    return StepOutcome(tok.node_id, context=result)


def refuse_unless_granted(r: Report, tok: Tok | None, inst: Inst | None) -> None:
    """PermissionDenied unless the sender's grant covers the task's queue and, for a run of
    locally run steps, the queue of every step in it. Read under the task's lock, before the
    report changes anything; an unknown task is left to `refuse_unless_current` (answered alike
    whoever asks)."""
    if r.grant is None or tok is None or inst is None:
        return
    r.grant.check(tok.queue or "", "report on a task of")
    if r.kind is ReportKind.ADVANCE:
        for step in r.steps:
            node = inst.graph.nodes.get(step.node_id)
            if isinstance(node, Task | Predicate):
                r.grant.check(node.queue, "report a step of")


def refuse_unless_current(tok: Tok | None, inst: Inst | None, task_id: str, lease: str) -> bool:
    """Raise StaleLease unless `lease` is the token's; False when the instance has finished."""
    if tok is None or inst is None:
        raise StaleLease(task_id, "no such task")
    if tok.lease != lease:
        raise StaleLease(task_id)
    if inst.status is not InstanceStatus.RUNNING:
        return False
    if tok.state is not TokenState.LEASED:
        raise StaleLease(task_id, f"the task is {tok.state.value}, not leased")
    return True


def resent(tok: Tok | None, inst: Inst | None, task_id: str, lease: str, seq: int) -> bool:
    """Whether report `seq` under `lease` was applied already (docs/worker-protocol.md,
    "Report identity"): then it must be answered again, never applied a second time.

    The token remembers the last seq applied under its current lease (`report_seq`) and the
    lease its last final report ended (`released_lease`). A seq that skips one the server has
    not applied is refused: the worker lost track of what it sent.
    """
    if seq <= 0 or tok is None or inst is None:
        return False  # no identity: a legacy report, checked as before
    if tok.lease == lease and tok.state is TokenState.LEASED:
        if seq <= tok.report_seq:
            return True
        if seq > tok.report_seq + 1 and inst.status is InstanceStatus.RUNNING:
            raise ReportOutOfOrder(task_id, seq, tok.report_seq)
        return False
    return tok.released_lease == lease


def record_seq(tok: Tok, lease: str, seq: int) -> None:
    """After applying report `seq`: remember it under the lease, or as the released lease."""
    if seq <= 0:
        return
    tok.report_seq = seq if tok.state is TokenState.LEASED and tok.lease == lease else 0
    if tok.report_seq == 0:
        tok.released_lease = lease
