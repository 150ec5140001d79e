"""Reading schedules: the list, and one schedule described (its next fire times in its zone,
its last fires with their instances, what it skipped and why)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from itertools import islice
from typing import Any

from sqlalchemy import Connection, select

from wiggle.schedules import jitter_ms, nominal_times

from ..store import schema as s
from ..store.rows import loads

__all__ = [
    "Fire",
    "ScheduleView",
    "all_fires",
    "describe_schedule",
    "fire_of_instance",
    "list_schedules",
]

_s = s.schedules
_f = s.schedule_fires


@dataclass(frozen=True)
class Fire:
    """One decided nominal time (or a run of skipped ones, `count` up to `until_ms`)."""

    nominal_ms: int
    until_ms: int
    count: int
    due_ms: int
    outcome: str  # STARTED | BUFFERED | SKIPPED
    reason: str
    instance_id: str | None
    triggered: bool
    decided_at_ms: int

    def to_json(self) -> dict[str, Any]:
        return {
            "nominal_ms": self.nominal_ms,
            "until_ms": self.until_ms,
            "count": self.count,
            "due_ms": self.due_ms,
            "outcome": self.outcome,
            "reason": self.reason,
            "instance_id": self.instance_id,
            "triggered": self.triggered,
            "decided_at_ms": self.decided_at_ms,
        }


@dataclass(frozen=True)
class ScheduleView:
    name: str
    flow: str
    document: dict[str, Any]
    digest: str
    paused: bool
    note: str
    time_zone: str
    next_due_ms: int | None
    running_id: str | None
    buffered: int
    fired: int
    skipped: int
    created_at_ms: int
    updated_at_ms: int
    upcoming: tuple[str, ...] = ()  # local times, RFC 3339 with their offset
    recent: tuple[Fire, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "flow": self.flow,
            "document": self.document,
            "digest": self.digest,
            "paused": self.paused,
            "note": self.note,
            "time_zone": self.time_zone,
            "next_due_ms": self.next_due_ms,
            "running_id": self.running_id,
            "buffered": self.buffered,
            "fired": self.fired,
            "skipped": self.skipped,
            "created_at_ms": self.created_at_ms,
            "updated_at_ms": self.updated_at_ms,
            "upcoming": list(self.upcoming),
            "recent": [f.to_json() for f in self.recent],
        }


def _view(row: Any, **more: Any) -> ScheduleView:
    document = loads(row.document)
    return ScheduleView(
        name=row.name,
        flow=row.flow,
        document=document,
        digest=row.digest,
        paused=bool(row.paused),
        note=row.note,
        time_zone=document.get("time_zone", "UTC"),
        next_due_ms=None if row.next_due_ms is None else int(row.next_due_ms),
        running_id=row.running_id,
        buffered=int(row.buffered),
        fired=int(row.fired),
        skipped=int(row.skipped),
        created_at_ms=int(row.created_at_ms),
        updated_at_ms=int(row.updated_at_ms),
        **more,
    )


def list_schedules(conn: Connection, flow: str | None = None) -> list[ScheduleView]:
    q = select(_s).order_by(_s.c.name)
    if flow:
        q = q.where(_s.c.flow == flow)
    return [_view(row) for row in conn.execute(q)]


def describe_schedule(
    conn: Connection, name: str, *, upcoming: int = 10, recent: int = 20
) -> ScheduleView | None:
    row = conn.execute(select(_s).where(_s.c.name == name)).first()
    if row is None:
        return None
    from wiggle.schedules import load_stored  # (the loader: loaded by the first schedule read)

    schedule = load_stored(row.document)
    times: list[str] = []
    if not row.paused:
        zone = schedule.spec.zone
        for nominal in islice(nominal_times(schedule.spec, int(row.cursor_ms)), upcoming):
            due = nominal + jitter_ms(name, nominal, schedule.spec.jitter_ms)
            times.append(datetime.fromtimestamp(due / 1000, zone).isoformat(timespec="seconds"))
    fires = conn.execute(
        select(_f)
        .where(_f.c.schedule == name)
        .order_by(_f.c.decided_at_ms.desc(), _f.c.nominal_ms.desc())
        .limit(recent)
    ).all()
    return _view(row, upcoming=tuple(times), recent=tuple(_fire(f) for f in fires))


def _fire(row: Any) -> Fire:
    return Fire(
        nominal_ms=int(row.nominal_ms),
        until_ms=int(row.until_ms),
        count=int(row.count),
        due_ms=int(row.due_ms),
        outcome=row.outcome,
        reason=row.reason,
        instance_id=row.instance_id,
        triggered=bool(row.triggered),
        decided_at_ms=int(row.decided_at_ms),
    )


def fire_of_instance(conn: Connection, instance_id: str) -> tuple[str, int] | None:
    """The schedule and nominal time that started an instance, if one did."""
    row = conn.execute(
        select(_f.c.schedule, _f.c.nominal_ms).where(_f.c.instance_id == instance_id).limit(1)
    ).first()
    return None if row is None else (row.schedule, int(row.nominal_ms))


def all_fires(conn: Connection, name: str) -> list[Fire]:
    """Every fire a schedule recorded, oldest nominal time first."""
    rows = conn.execute(select(_f).where(_f.c.schedule == name).order_by(_f.c.nominal_ms))
    return [_fire(row) for row in rows]
