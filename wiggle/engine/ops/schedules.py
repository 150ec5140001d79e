"""Applying, pausing, triggering and deleting schedules (docs/schedules.md). The leader fires
them (firing.py); a backfill fires a past range (backfill.py)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, delete, func, insert, select, update

from wiggle.compiler import canonical_json
from wiggle.errors import InvalidRequest, ScheduleNotFound
from wiggle.schedules import Schedule, nominal_times, rfc3339

from ..store import schema as s
from ..store.rows import loads
from .context import OpsContext
from .schedule_base import (
    CheckInput,
    Round,
    locked,
    next_due,
    now_ms,
    observed,
    parsed,
    record_skips,
)

__all__ = ["Applied", "ScheduleNotFound", "apply", "delete_schedule", "set_paused", "trigger"]

_s = s.schedules
_f = s.schedule_fires


@dataclass(frozen=True)
class Applied:
    """What `apply` did: created the schedule, or changed these top-level fields of it."""

    name: str
    created: bool
    changed: tuple[str, ...]
    next_due_ms: int | None


def _stored(schedule: Schedule) -> tuple[str, str]:
    text = canonical_json(schedule.document).decode()
    return text, "sha256:" + hashlib.sha256(text.encode()).hexdigest()


# -- applying -------------------------------------------------------------------------------------


def apply(ctx: OpsContext, conn: Connection, schedule: Schedule) -> Applied:
    """Create the schedule, or update it in place: an update keeps its cursor, so no nominal
    time it already decided is decided again (a new version of the flow, or a new timetable,
    never fires a time twice)."""
    text, digest = _stored(schedule)
    now = now_ms(conn, ctx)
    row = locked(ctx, conn, schedule.name)
    if row is None:
        due = None if schedule.paused else next_due(schedule, now)
        conn.execute(
            insert(_s).values(
                name=schedule.name,
                flow=schedule.flow,
                document=text,
                digest=digest,
                paused=schedule.paused,
                note="paused when applied" if schedule.paused else "",
                cursor_ms=now,
                next_due_ms=due,
                running_id=None,
                buffered=0,
                fired=0,
                skipped=0,
                created_at_ms=now,
                updated_at_ms=now,
            )
        )
        return Applied(schedule.name, True, (), due)
    before = loads(row.document)
    after = schedule.document
    changed = tuple(sorted(k for k in {*before, *after} if before.get(k) != after.get(k)))
    if row.digest == digest:
        return Applied(schedule.name, False, (), row.next_due_ms)
    # `paused` in the document decides only when the document says it.
    paused = bool(after["paused"]) if "paused" in after else bool(row.paused)
    due = None if paused else next_due(schedule, int(row.cursor_ms))
    conn.execute(
        update(_s)
        .where(_s.c.name == schedule.name)
        .values(
            flow=schedule.flow,
            document=text,
            digest=digest,
            paused=paused,
            next_due_ms=due,
            updated_at_ms=now,
        )
    )
    return Applied(schedule.name, False, changed, due)


def delete_schedule(ctx: OpsContext, conn: Connection, name: str) -> None:
    """Delete a schedule and its record of fires; the instances it started are left alone."""
    if conn.execute(delete(_s).where(_s.c.name == name)).rowcount == 0:
        raise ScheduleNotFound(name)
    conn.execute(delete(_f).where(_f.c.schedule == name))


def set_paused(ctx: OpsContext, conn: Connection, name: str, paused: bool, note: str) -> None:
    """Pause (nothing fires; the nominal times in between are skipped) or unpause (the
    timetable goes on from now: the times that passed while paused are not caught up)."""
    row = locked(ctx, conn, name)
    if row is None:
        raise ScheduleNotFound(name)
    now = now_ms(conn, ctx)
    values: dict[str, Any] = {"paused": paused, "note": note, "updated_at_ms": now}
    if paused:
        values["next_due_ms"] = None
    elif row.paused:
        schedule = parsed(row.document)
        skipped = list(_passed(schedule, int(row.cursor_ms), now))
        if skipped:
            more = " (and more not counted)" if len(skipped) >= _MAX_PASSED else ""
            reason = f"skipped while paused{more}"
            record_skips(conn, name, [(n, n) for n in skipped], reason, now)
            values["skipped"] = row.skipped + len(skipped)
        values["cursor_ms"] = max(int(row.cursor_ms), now)
        values["next_due_ms"] = next_due(schedule, values["cursor_ms"])
    conn.execute(update(_s).where(_s.c.name == name).values(**values))


_MAX_PASSED = 100_000


def _passed(schedule: Schedule, after_ms: int, until_ms: int) -> Sequence[int]:
    """The nominal times in (after, until], at most _MAX_PASSED of them (a schedule firing
    every second, paused for a month, is not walked to the end: the rest are skipped uncounted)."""
    out: list[int] = []
    for nominal in nominal_times(schedule.spec, after_ms, until_ms=until_ms):
        out.append(nominal)
        if len(out) >= _MAX_PASSED:
            break
    return out


def trigger(
    ctx: OpsContext, conn: Connection, *, name: str, check_input: CheckInput
) -> dict[str, Any]:
    """Fire the schedule now, once, under its overlap policy (paused or not): the nominal
    time is now, to the second. Its fire row, as recorded."""
    row = locked(ctx, conn, name)
    if row is None:
        raise ScheduleNotFound(name)
    now = now_ms(conn, ctx)
    nominal = now - now % 1000
    if conn.execute(
        select(func.count()).where(_f.c.schedule == name, _f.c.nominal_ms == nominal)
    ).scalar():
        raise InvalidRequest(
            f"schedule {name} already fired for {rfc3339(nominal)}; trigger again in a second"
        )
    schedule = parsed(row.document)
    round_ = Round(ctx, conn, schedule, check_input, now, row.running_id, int(row.buffered))
    fired = round_.fire(nominal, now, triggered=True)
    if fired:
        conn.execute(insert(_f), [fired])
        result = fired
        observed(ctx, conn, schedule.flow, [fired])
    else:
        (_, due, reason) = round_.skipped[0]
        result = {
            "schedule": name,
            "nominal_ms": nominal,
            "until_ms": nominal,
            "count": 1,
            "due_ms": due,
            "outcome": "SKIPPED",
            "reason": reason,
            "instance_id": None,
            "triggered": True,
            "decided_at_ms": now,
            "started_at_ms": None,
        }
        conn.execute(insert(_f), [result])
        observed(ctx, conn, schedule.flow, [result])
    conn.execute(
        update(_s)
        .where(_s.c.name == name)
        .values(
            running_id=round_.running_id,
            buffered=round_.buffered,
            fired=row.fired + round_.fired,
            skipped=row.skipped + len(round_.skipped),
            updated_at_ms=now,
        )
    )
    return result
