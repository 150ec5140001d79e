"""The leader: one engine at a time fires timers, reclaims expired leases and records human
tasks' reminders.

Leadership is a row with a holder, an expiry and a term that grows with every new holder (or
every re-acquisition after a lapse). Duties are idempotent anyway: each due timer and each
expired lease is handled in its own transaction whose token UPDATE is conditional on the state
it saw (state, wake_at, lease), so two engines racing over one timer fire it exactly once; a
reminder's UPDATE is conditional on the task's `next_remind_at_ms` it saw due.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, bindparam, case, exists, func, literal_column, select, update

from ..store import schema as s
from ..store.db import Database

__all__ = [
    "acquire_stmt",
    "due_leases_stmt",
    "due_reminders_stmt",
    "due_timers_stmt",
    "next_due",
    "next_wakeup",
    "wakeup_stmt",
]

_t = s.tokens
_l = s.leader
_h = s.human_tasks
_i = s.instances


def acquire_stmt(db: Database) -> Any:
    """Take or renew leadership; returns the term when this engine holds it after the call."""
    now: Any = literal_column(db.now_sql)
    mine = _l.c.holder == bindparam("me")
    return (
        update(_l)
        .where(_l.c.name == "main", mine | (_l.c.expires_at_ms < now))
        .values(
            holder=bindparam("me"),
            term=case((mine & (_l.c.expires_at_ms >= now), _l.c.term), else_=_l.c.term + 1),
            expires_at_ms=now + bindparam("ttl_ms"),
        )
        .returning(_l.c.term)
    )


def release_stmt() -> Any:
    return (
        update(_l)
        .where(_l.c.name == "main", _l.c.holder == bindparam("me"))
        .values(expires_at_ms=0)
    )


def _still_leader(db: Database) -> Any:
    return exists().where(
        _l.c.name == "main",
        _l.c.holder == bindparam("me"),
        _l.c.term == bindparam("term"),
        _l.c.expires_at_ms > literal_column(db.now_sql),
    )


def due_timers_stmt(db: Database) -> Any:
    now: Any = literal_column(db.now_sql)
    return (
        select(_t.c.id, _t.c.state, _t.c.wake_at_ms)
        .where(
            s.TIMED_TOKENS,  # literal: the partial wake index's condition
            _t.c.wake_at_ms <= now,
            _still_leader(db),
        )
        .order_by(_t.c.wake_at_ms)
        .limit(bindparam("limit"))
    )


def due_leases_stmt(db: Database) -> Any:
    now: Any = literal_column(db.now_sql)
    return (
        select(_t.c.id, _t.c.lease)
        .where(
            s.LEASED_TOKENS,  # literal: the partial lease index's condition
            _t.c.lease_expires_at_ms < now,
            _still_leader(db),
        )
        .order_by(_t.c.lease_expires_at_ms)
        .limit(bindparam("limit"))
    )


def due_reminders_stmt(db: Database) -> Any:
    """Human tasks whose next reminder is due (open or not: `ops.tasks.remind` decides)."""
    now: Any = literal_column(db.now_sql)
    return (
        select(_h.c.id, _h.c.next_remind_at_ms)
        .where(
            s.REMINDED_TASKS,  # literal: the partial reminder index's condition
            _h.c.next_remind_at_ms <= now,
            _still_leader(db),
        )
        .order_by(_h.c.next_remind_at_ms)
        .limit(bindparam("limit"))
    )


def wakeup_stmt(db: Database, *, open_reminders: bool = False) -> Any:
    """The earliest timer, lease expiry, schedule fire and reminder, and the database's now, in
    one round trip. A reminder of a task that closed without an answer stays in the index until
    it falls due (the leader then drops it); `open_reminders` leaves those out, at the price of
    a join (what a driver of a virtual clock moves it to: only what will happen)."""
    timers = select(func.min(_t.c.wake_at_ms)).where(s.TIMED_TOKENS).scalar_subquery()
    leases = select(func.min(_t.c.lease_expires_at_ms)).where(s.LEASED_TOKENS).scalar_subquery()
    _s = s.schedules
    fires = select(func.min(_s.c.next_due_ms)).where(_s.c.next_due_ms.is_not(None))
    reminders = select(func.min(_h.c.next_remind_at_ms)).where(s.REMINDED_TASKS)
    if open_reminders:
        reminders = reminders.select_from(
            _h.join(_t, _t.c.id == _h.c.token_id).join(_i, _i.c.id == _h.c.instance_id)
        ).where(
            _t.c.state == "AWAITING",
            _t.c.node_id == _h.c.node_id,
            _i.c.status == "RUNNING",
        )
    return select(
        timers.label("timer"),
        leases.label("lease"),
        fires.scalar_subquery().label("fire"),
        reminders.scalar_subquery().label("reminder"),
        db.now,
    )


def next_due(conn: Connection, db: Database) -> int | None:
    """The earliest thing due (for a driver of a virtual clock: reminders of open tasks only)."""
    row = conn.execute(wakeup_stmt(db, open_reminders=True)).one()
    soonest = [int(v) for v in (row.timer, row.lease, row.fire, row.reminder) if v is not None]
    return min(soonest) if soonest else None


def next_wakeup(conn: Connection, db: Database, cap_s: float) -> float:
    row = conn.execute(wakeup_stmt(db)).one()
    now = int(row.now_ms)
    soonest = [v for v in (row.timer, row.lease, row.fire, row.reminder) if v is not None]
    if not soonest:
        return cap_s
    # A lease is reclaimed once strictly past its expiry: wake a hair after it.
    wait_ms = min(soonest) - now + 1
    return float(max(0.0, min(cap_s, wait_ms / 1000.0)))
