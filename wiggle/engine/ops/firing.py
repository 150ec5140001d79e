"""The leader fires schedules, exactly once per nominal time (docs/schedules.md).

A schedule's row holds its document and a cursor: every nominal time up to the cursor is
decided. Deciding the nominal times that fell due is one transaction: it reads the row, decides
each time by the firing rules (wiggle.schedules: catch-up, overlap), records each fire in
`wiggle_schedule_fires` (keyed by schedule and nominal time), starts each instance (id
`<schedule>-<nominal time>`) and moves the cursor, the row's UPDATE fenced on the cursor it read.
A leader killed anywhere in it commits all of that or none; two engines deciding the same times
cannot both commit (the second's fence fails, and the fire's key and the instance id would refuse
it anyway), so no nominal time is lost or fired twice.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Select, insert, literal_column, select, update

from wiggle.schedules import catch_up, jitter_ms, nominal_times

from ..model.types import InstanceStatus
from ..store import schema as s
from ..store.db import Database
from ..store.transition import FenceLost
from .context import OpsContext
from .schedule_base import (
    MAX_DECIDED_AT_ONCE,
    CheckInput,
    Round,
    locked,
    next_due,
    now_ms,
    observed,
    parsed,
    record_skips,
)

__all__ = ["buffered_ready", "due_schedules", "fire_due", "start_buffered"]

_s = s.schedules
_f = s.schedule_fires


def due_schedules(ctx: OpsContext, conn: Connection, limit: int) -> list[str]:
    """The schedules with a fire due now, soonest first (through the partial index)."""
    return list(conn.execute(due_schedules_stmt(ctx.db, limit)).scalars())


def due_schedules_stmt(db: Database, limit: int) -> Select[Any]:
    now: Any = db.now
    return (
        select(_s.c.name)
        .where(_s.c.next_due_ms.is_not(None), _s.c.next_due_ms <= now)
        .order_by(_s.c.next_due_ms)
        .limit(limit)
    )


def buffered_ready(conn: Connection, limit: int) -> list[str]:
    """The schedules with buffered fires whose running instance has ended (or is gone)."""
    return list(conn.execute(buffered_ready_stmt(limit)).scalars())


def buffered_ready_stmt(limit: int) -> Select[Any]:
    _i = s.instances
    return (
        select(_s.c.name)
        .select_from(_s.outerjoin(_i, _i.c.id == _s.c.running_id))
        .where(
            # Written out, not a bound parameter: only then can the planner tell that the
            # partial index ix_wiggle_schedules_buffered (WHERE buffered > 0) holds every
            # row asked for, instead of reading every schedule at each tick.
            _s.c.buffered > literal_column("0"),
            _s.c.paused.is_(False),
            (_i.c.status.is_(None)) | (_i.c.status != InstanceStatus.RUNNING.value),
        )
        .limit(limit)
    )


def fire_due(ctx: OpsContext, conn: Connection, *, name: str, check_input: CheckInput) -> bool:
    """Decide the schedule's nominal times that fell due (at most MAX_DECIDED_AT_ONCE), in
    this one transaction; False when another engine got there first or none is due."""
    row = locked(ctx, conn, name)
    now = now_ms(conn, ctx)
    if row is None or row.paused or row.next_due_ms is None or row.next_due_ms > now:
        return False
    schedule = parsed(row.document)
    cursor = int(row.cursor_ms)
    due: list[tuple[int, int]] = []
    for nominal in nominal_times(schedule.spec, cursor, until_ms=now):
        at = nominal + jitter_ms(name, nominal, schedule.spec.jitter_ms)
        if at > now:
            break
        due.append((nominal, at))
        if len(due) >= MAX_DECIDED_AT_ONCE:
            break
    # A time `trigger` or a backfill already fired is decided: leave it be.
    if due:
        known = set(
            conn.execute(
                select(_f.c.nominal_ms).where(
                    _f.c.schedule == name,
                    _f.c.nominal_ms > cursor,
                    _f.c.nominal_ms <= due[-1][0],
                )
            ).scalars()
        )
        decided_up_to = due[-1][0]
        due = [(n, at) for n, at in due if n not in known]
    else:
        decided_up_to = cursor
    round_ = Round(ctx, conn, schedule, check_input, now, row.running_id, int(row.buffered))
    fires = []
    for decision, (nominal, at) in zip(catch_up(due, now, schedule.catch_up), due, strict=True):
        if not decision.fire:
            round_.skipped.append((nominal, at, decision.reason))
            continue
        fired = round_.fire(nominal, at)
        if fired:
            fires.append(fired)
    if fires:
        conn.execute(insert(_f), fires)
    skips = [(n, at) for n, at, _ in round_.skipped]
    skipped = record_skips(conn, name, skips, None, now, round_.skipped)
    observed(ctx, conn, schedule.flow, fires + skipped)
    moved = conn.execute(
        update(_s)
        .where(_s.c.name == name, _s.c.cursor_ms == cursor)
        .values(
            cursor_ms=decided_up_to,
            next_due_ms=next_due(schedule, decided_up_to),
            running_id=round_.running_id,
            buffered=round_.buffered,
            fired=row.fired + round_.fired,
            skipped=row.skipped + len(round_.skipped),
            updated_at_ms=now,
        )
    )
    if moved.rowcount != 1:
        raise FenceLost(f"schedule {name}: its cursor moved under this transaction")
    return True


def start_buffered(
    ctx: OpsContext, conn: Connection, *, name: str, check_input: CheckInput
) -> bool:
    """Start the oldest buffered fire of a schedule whose running instance has ended."""
    row = locked(ctx, conn, name)
    if row is None or row.buffered <= 0 or row.paused:
        return False
    now = now_ms(conn, ctx)
    schedule = parsed(row.document)
    round_ = Round(ctx, conn, schedule, check_input, now, row.running_id, 0)
    if round_.running():
        return False
    oldest = conn.execute(
        select(_f.c.nominal_ms)
        .where(_f.c.schedule == name, _f.c.outcome == "BUFFERED")
        .order_by(_f.c.nominal_ms)
        .limit(1)
    ).scalar()
    values: dict[str, Any]
    if oldest is None:  # nothing waits after all: the count was stale
        values = {"buffered": 0}
    else:
        started, reason = round_.start(int(oldest))
        if started is None:
            outcome: dict[str, Any] = {"outcome": "SKIPPED", "reason": reason}
            values = {"buffered": row.buffered - 1, "skipped": row.skipped + 1}
        else:
            outcome = {"outcome": "STARTED", "instance_id": started, "started_at_ms": now}
            values = {"buffered": row.buffered - 1, "fired": row.fired + 1, "running_id": started}
        conn.execute(
            update(_f).where(_f.c.schedule == name, _f.c.nominal_ms == oldest).values(**outcome)
        )
        fire = conn.execute(
            select(_f).where(_f.c.schedule == name, _f.c.nominal_ms == oldest)
        ).first()
        if fire is not None:
            observed(ctx, conn, schedule.flow, [{**fire._asdict(), "decided_at_ms": now}])
    moved = conn.execute(
        update(_s)
        .where(_s.c.name == name, _s.c.buffered == row.buffered)
        .values(**values, updated_at_ms=now)
    )
    if moved.rowcount != 1:
        raise FenceLost(f"schedule {name}: its buffer moved under this transaction")
    return True
