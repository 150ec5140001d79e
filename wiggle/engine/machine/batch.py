"""A batch of worker reports applied in one transaction: group commit's unit of work.

All the batch's tasks are read in one statement that also locks their root instances (in root
id order, so two batches never wait on each other in a cycle); each report is then checked and
applied in memory, in arrival order, through one shared identity map (a report on a token that
an earlier report of the batch moved sees it moved); one statement writes every token and event.

A report is refused (PermissionDenied, StaleLease, WrongPath, ReportOutOfOrder) before it
changes anything, so a refused report never spoils its batch. Anything else that goes wrong
aborts the whole batch, and the engine applies its reports one transaction each (`_run_reports`,
see wiggle.engine._engine.Engine).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import orjson
from sqlalchemy import select

from wiggle.errors import WiggleError

from ..model.types import AdvanceResult, InstanceStatus, Report, ReportKind, StepOutcome, TokenState
from ..store import schema as s
from ..store.queries import LOCKED_INSTANCE_FIELDS, TOKEN_COLUMN_NAMES, lock_tasks_sql
from .eager import lease_ready, next_lease, reissue
from .park import inst_from_row
from .reports import (
    apply_plan,
    fence_lease,
    plan_steps,
    record_seq,
    refuse_unless_current,
    refuse_unless_granted,
    resent,
    server_outcome,
)
from .tx import Inst, Tok, Tx

__all__ = ["apply_reports", "lock_tasks"]

_i = s.instances


def lock_tasks(tx: Tx, task_ids: Sequence[str]) -> dict[str, tuple[Tok, Inst]]:
    """Read `task_ids` with their instances, locking every root instance (PostgreSQL) in one
    statement; sets `tx.now` from the database clock read by that statement."""
    ids = sorted(set(task_ids))
    postgres = tx.db.is_postgres
    param: Any
    if postgres and len(ids) == 1:
        sql = tx.db.cached(
            "lock_task_sql", lambda: lock_tasks_sql(True, tx.db.now_sql, single=True)
        )
        param = {"tid": ids[0]}
    else:
        sql = tx.db.cached("lock_tasks_sql", lambda: lock_tasks_sql(postgres, tx.db.now_sql))
        param = {"tids": ids} if postgres else (orjson.dumps(ids).decode(),)
    rows = tx.db.first_rows(tx.conn, sql, param)  # on PostgreSQL, the BEGIN goes with it
    if not rows:
        tx.now = int(tx.conn.execute(select(tx.db.now)).scalar_one())
        return {}
    found: dict[str, tuple[Tok, Inst]] = {}
    width = len(TOKEN_COLUMN_NAMES)
    fields = LOCKED_INSTANCE_FIELDS
    for row in rows:
        values = tuple(row)
        tx.now = int(values[-1])
        own_id = values[-2]
        inst = tx.instances.get(own_id)
        if inst is None:
            inst_map = dict(zip(fields, values[width : width + len(fields)], strict=True))
            if own_id != inst_map["id"]:
                # A child instance: its row was read before the root's lock was granted (only
                # the locked row is re-read on PostgreSQL); read it again now, under the lock.
                fresh = tx.conn.execute(select(*_i.c).where(_i.c.id == own_id)).first()
                assert fresh is not None
                inst_map = dict(fresh._mapping)
            inst = inst_from_row(tx, inst_map)
        found[values[0]] = (tx.adopt_values(values), inst)
    return found


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
