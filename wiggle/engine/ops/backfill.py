"""Backfill: a past range of a schedule's nominal times fired on purpose, each once, as a
durable bulk action (action `backfill`, one item per nominal time; docs/schedules.md)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, insert, select, update

from wiggle.errors import InvalidRequest, ScheduleNotFound
from wiggle.schedules import instance_id, nominal_times, rfc3339

from ..model.types import InstanceStatus, Json
from ..store import schema as s
from .bulk import Skip
from .context import OpsContext
from .instances import status_of
from .schedule_base import Round, locked, now_ms, observed, parsed

__all__ = [
    "BACKFILL_OVERLAP",
    "MAX_BACKFILL",
    "BackfillPreview",
    "backfill_items",
    "backfill_one",
    "preview_backfill",
]

_s = s.schedules
_f = s.schedule_fires

#: The most nominal times one backfill may fire (split a longer range into several).
MAX_BACKFILL = 10_000

#: What a backfilled time does while the schedule's last instance runs.
#: What a backfilled time does while the schedule's last instance runs.
BACKFILL_OVERLAP = ("allow_all", "skip")


@dataclass(frozen=True)
class BackfillPreview:
    """What a backfill of a range would do: the nominal times it names, those already decided
    (which it leaves alone), and the first and last it would fire."""

    schedule: str
    nominal_ms: tuple[int, ...]  # every time it would fire, oldest first
    already: int  # times in the range already decided (fired, buffered or skipped)

    @property
    def count(self) -> int:
        return len(self.nominal_ms)


def preview_backfill(
    ctx: OpsContext, conn: Connection, name: str, from_ms: int, to_ms: int
) -> BackfillPreview:
    """The nominal times of [from, to] a backfill would fire; InvalidRequest for a reversed
    range, one reaching past now, or one of more than MAX_BACKFILL times."""
    row = conn.execute(select(_s).where(_s.c.name == name)).first()
    if row is None:
        raise ScheduleNotFound(name)
    if to_ms < from_ms:
        raise InvalidRequest(f"the backfill's end {rfc3339(to_ms)} is before its start")
    now = now_ms(conn, ctx)
    if to_ms > now:
        raise InvalidRequest(
            f"the backfill's end {rfc3339(to_ms)} is in the future; the timetable fires those"
        )
    schedule = parsed(row.document)
    times: list[int] = []
    for nominal in nominal_times(schedule.spec, from_ms - 1, until_ms=to_ms):
        times.append(nominal)
        if len(times) > MAX_BACKFILL:
            raise InvalidRequest(
                f"the range names more than {MAX_BACKFILL} nominal times of schedule {name}; "
                "backfill it in shorter ranges"
            )
    decided = set(
        conn.execute(
            select(_f.c.nominal_ms).where(
                _f.c.schedule == name, _f.c.nominal_ms >= from_ms, _f.c.nominal_ms <= to_ms
            )
        ).scalars()
    )
    fresh = tuple(t for t in times if t not in decided)
    return BackfillPreview(name, fresh, len(times) - len(fresh))


def backfill_items(preview: BackfillPreview) -> list[tuple[str, Json]]:
    """A backfill batch's items: each nominal time's instance id, with the time."""
    return [
        (instance_id(preview.schedule, n), {"schedule": preview.schedule, "nominal_ms": n})
        for n in preview.nominal_ms
    ]


def backfill_one(
    ctx: OpsContext, conn: Connection, iid: str, params: dict[str, Json], detail: Json, by: str
) -> str:
    """A backfill batch's item: fire one past nominal time, once, as a triggered fire. A time
    decided meanwhile (by the timetable, a trigger or another backfill) is skipped, and so is
    one whose start the flow refuses, or, with overlap `skip`, one that comes while the
    schedule's last instance runs (the item's message says why; no fire is recorded, so the
    time can be backfilled again). Backfilled instances do not become the schedule's running
    instance: its timetable's overlap policy does not wait for them."""
    assert isinstance(detail, dict)
    name, nominal = str(detail["schedule"]), int(str(detail["nominal_ms"]))
    row = locked(ctx, conn, name)
    if row is None:
        raise Skip(f"schedule {name} was deleted")
    known = conn.execute(
        select(_f.c.outcome).where(_f.c.schedule == name, _f.c.nominal_ms == nominal)
    ).scalar()
    if known is not None:
        raise Skip(f"already decided: {known}")
    now = now_ms(conn, ctx)
    schedule = parsed(row.document)
    running = row.running_id
    skips_overlap = params.get("overlap") == "skip" and running is not None
    if skips_overlap and status_of(conn, running) is InstanceStatus.RUNNING:
        raise Skip(f"overlap: {running} is still running")
    round_ = Round(ctx, conn, schedule, ctx.check_input, now, None, 0)
    started, reason = round_.start(nominal)
    if started is None:
        raise Skip(reason)
    fire = {
        "schedule": name,
        "nominal_ms": nominal,
        "until_ms": nominal,
        "count": 1,
        "due_ms": nominal,
        "outcome": "STARTED",
        "reason": f"backfill by {by}",
        "instance_id": started,
        "triggered": True,
        "decided_at_ms": now,
        "started_at_ms": now,
    }
    conn.execute(insert(_f), [fire])
    conn.execute(update(_s).where(_s.c.name == name).values(fired=_s.c.fired + 1))
    observed(ctx, conn, schedule.flow, [fire])
    return f"started {started}"
