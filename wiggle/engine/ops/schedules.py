"""Schedules (docs/schedules.md): applying them, and firing them exactly once per nominal time.

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

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, delete, func, insert, select, update

from wiggle.compiler import canonical_json
from wiggle.errors import InvalidRequest, ScheduleNotFound, WiggleError
from wiggle.expressions import EvaluationError
from wiggle.graph import Graph
from wiggle.schedules import (
    Schedule,
    catch_up,
    fire_input,
    instance_id,
    jitter_ms,
    load_stored,
    nominal_times,
    overlap,
    rfc3339,
)

from ..machine.starts import StartRequest, apply_starts
from ..model.types import InstanceStatus, Json
from ..store import schema as s
from ..store.rows import dumps, loads
from ..store.transition import FenceLost
from .bulk import Skip
from .context import OpsContext
from .instances import cancel, status_of

__all__ = [
    "BACKFILL_OVERLAP",
    "MAX_BACKFILL",
    "MAX_DECIDED_AT_ONCE",
    "Applied",
    "BackfillPreview",
    "ScheduleNotFound",
    "apply",
    "backfill_items",
    "backfill_one",
    "buffered_ready",
    "delete_schedule",
    "due_schedules",
    "fire_due",
    "parsed",
    "preview_backfill",
    "set_paused",
    "start_buffered",
    "trigger",
]

_s = s.schedules
_f = s.schedule_fires

#: The most nominal times one transaction decides; a longer backlog (a schedule firing every
#: second after an hour without a server) is decided over the next ticks.
MAX_DECIDED_AT_ONCE = 1000

CheckInput = Callable[[Graph, Json], None]


@dataclass(frozen=True)
class Applied:
    """What `apply` did: created the schedule, or changed these top-level fields of it."""

    name: str
    created: bool
    changed: tuple[str, ...]
    next_due_ms: int | None


def parsed(document: str) -> Schedule:
    """A stored document as a Schedule (checked when applied; cached by its text)."""
    return load_stored(document)


def _stored(schedule: Schedule) -> tuple[str, str]:
    text = canonical_json(schedule.document).decode()
    return text, "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _now(conn: Connection, ctx: OpsContext) -> int:
    return int(ctx.db.first_rows(conn, f"SELECT {ctx.db.now_sql}", {})[0][0])


def _next_due(schedule: Schedule, after_ms: int) -> int | None:
    for nominal in nominal_times(schedule.spec, after_ms):
        return nominal + jitter_ms(schedule.name, nominal, schedule.spec.jitter_ms)
    return None


def _locked(ctx: OpsContext, conn: Connection, name: str) -> Any:
    q = select(_s).where(_s.c.name == name)
    if ctx.db.is_postgres:
        q = q.with_for_update()
    return conn.execute(q).first()


# -- applying -------------------------------------------------------------------------------------


def apply(ctx: OpsContext, conn: Connection, schedule: Schedule) -> Applied:
    """Create the schedule, or update it in place: an update keeps its cursor, so no nominal
    time it already decided is decided again (a new version of the flow, or a new timetable,
    never fires a time twice)."""
    text, digest = _stored(schedule)
    now = _now(conn, ctx)
    row = _locked(ctx, conn, schedule.name)
    if row is None:
        due = None if schedule.paused else _next_due(schedule, now)
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
    due = None if paused else _next_due(schedule, int(row.cursor_ms))
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
    row = _locked(ctx, conn, name)
    if row is None:
        raise ScheduleNotFound(name)
    now = _now(conn, ctx)
    values: dict[str, Any] = {"paused": paused, "note": note, "updated_at_ms": now}
    if paused:
        values["next_due_ms"] = None
    elif row.paused:
        schedule = parsed(row.document)
        skipped = list(_passed(schedule, int(row.cursor_ms), now))
        if skipped:
            more = " (and more not counted)" if len(skipped) >= _MAX_PASSED else ""
            reason = f"skipped while paused{more}"
            _record_skips(conn, name, [(n, n) for n in skipped], reason, now)
            values["skipped"] = row.skipped + len(skipped)
        values["cursor_ms"] = max(int(row.cursor_ms), now)
        values["next_due_ms"] = _next_due(schedule, values["cursor_ms"])
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


# -- firing ---------------------------------------------------------------------------------------


def due_schedules(ctx: OpsContext, conn: Connection, limit: int) -> list[str]:
    """The schedules with a fire due now, soonest first (through the partial index)."""
    now: Any = ctx.db.now
    q = (
        select(_s.c.name)
        .where(_s.c.next_due_ms.is_not(None), _s.c.next_due_ms <= now)
        .order_by(_s.c.next_due_ms)
        .limit(limit)
    )
    return list(conn.execute(q).scalars())


def buffered_ready(conn: Connection, limit: int) -> list[str]:
    """The schedules with buffered fires whose running instance has ended (or is gone)."""
    _i = s.instances
    q = (
        select(_s.c.name)
        .select_from(_s.outerjoin(_i, _i.c.id == _s.c.running_id))
        .where(
            _s.c.buffered > 0,
            _s.c.paused.is_(False),
            (_i.c.status.is_(None)) | (_i.c.status != InstanceStatus.RUNNING.value),
        )
        .limit(limit)
    )
    return list(conn.execute(q).scalars())


@dataclass
class _Round:
    """One schedule's decisions in one transaction."""

    ctx: OpsContext
    conn: Connection
    schedule: Schedule
    check_input: CheckInput
    now: int
    running_id: str | None
    buffered: int
    fired: int = 0
    skipped: list[tuple[int, int, str]] = field(default_factory=list)  # (nominal, due, reason)

    def running(self) -> bool:
        if self.running_id is None:
            return False
        return status_of(self.conn, self.running_id) is InstanceStatus.RUNNING

    def fire(self, nominal: int, due: int, *, triggered: bool = False) -> dict[str, Any]:
        """Fire one nominal time under the overlap policy; its fire row's values."""
        action = overlap(self.schedule.overlap, self.running(), self.buffered)
        row: dict[str, Any] = {
            "schedule": self.schedule.name,
            "nominal_ms": nominal,
            "until_ms": nominal,
            "count": 1,
            "due_ms": due,
            "triggered": triggered,
            "decided_at_ms": self.now,
            "instance_id": None,
            "started_at_ms": None,
            "reason": "",
        }
        if action == "skip":
            self.skipped.append((nominal, due, f"overlap: {self.running_id} is still running"))
            return {}
        if action == "buffer":
            self.buffered += 1
            waiting = self.running_id if self.running() else "the fires buffered before it"
            return {**row, "outcome": "BUFFERED", "reason": f"waiting for {waiting}"}
        if action == "cancel" and self.running_id is not None:
            cancel(
                self.ctx,
                self.conn,
                self.running_id,
                f"schedule {self.schedule.name}: a later fire overlaps it "
                "(overlap: cancel_running)",
            )
        started, reason = self.start(nominal)
        if started is None:
            self.skipped.append((nominal, due, reason))
            return {}
        self.fired += 1
        self.running_id = started
        return {**row, "outcome": "STARTED", "instance_id": started, "started_at_ms": self.now}

    def start(self, nominal: int) -> tuple[str | None, str]:
        """Start the instance of `nominal`: its id, or None and why it could not start."""
        ident = instance_id(self.schedule.name, nominal)
        try:
            data = fire_input(self.schedule, ident, nominal, self.now)
        except EvaluationError as exc:
            return None, f"input_values: {exc}"
        request = StartRequest(self.schedule.flow, data, self.schedule.version, ident)
        tx = self.ctx.tx(self.conn)
        (result,) = apply_starts(tx, [request], self.check_input, self.ctx.default_mode)
        tx.finish()
        if isinstance(result, WiggleError):
            return None, f"not started: {result}"
        return ident, ""


def fire_due(ctx: OpsContext, conn: Connection, *, name: str, check_input: CheckInput) -> bool:
    """Decide the schedule's nominal times that fell due (at most MAX_DECIDED_AT_ONCE), in
    this one transaction; False when another engine got there first or none is due."""
    row = _locked(ctx, conn, name)
    now = _now(conn, ctx)
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
    round_ = _Round(ctx, conn, schedule, check_input, now, row.running_id, int(row.buffered))
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
    skipped = _record_skips(conn, name, skips, None, now, round_.skipped)
    _observed(ctx, conn, schedule.flow, fires + skipped)
    moved = conn.execute(
        update(_s)
        .where(_s.c.name == name, _s.c.cursor_ms == cursor)
        .values(
            cursor_ms=decided_up_to,
            next_due_ms=_next_due(schedule, decided_up_to),
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


def reason_kind(reason: str) -> str:
    """A skip's reason, as the metrics label it."""
    for prefix, kind in (
        ("overlap:", "overlap"),
        ("missed, older than", "window"),
        ("missed", "missed"),
        ("skipped while paused", "paused"),
        ("input_values:", "input"),
        ("not started:", "not_started"),
    ):
        if reason.startswith(prefix):
            return kind
    return "other"


def _observed(ctx: OpsContext, conn: Connection, flow: str, rows: list[dict[str, Any]]) -> None:
    """Fire rows, for the event observers (the server's metrics) once the transaction commits:
    `schedule_fired` with the fire's lateness, `schedule_skipped` with its reason and count."""
    if not ctx.db.event_observers or not rows:
        return
    events = []
    for row in rows:
        if row["outcome"] == "STARTED":
            detail = {
                "schedule": row["schedule"],
                "lateness_ms": max(0, row["decided_at_ms"] - row["due_ms"]),
                "triggered": row["triggered"],
            }
            events.append(("schedule_fired", flow, "", dumps(detail)))
        elif row["outcome"] == "SKIPPED":
            detail = {
                "schedule": row["schedule"],
                "reason": reason_kind(row["reason"]),
                "count": row["count"],
            }
            events.append(("schedule_skipped", flow, "", dumps(detail)))
    ctx.db.logged(conn, events)


def _record_skips(
    conn: Connection,
    name: str,
    times: list[tuple[int, int]],
    reason: str | None,
    now: int,
    reasons: list[tuple[int, int, str]] | None = None,
) -> list[dict[str, Any]]:
    """Skipped nominal times as rows, a run of consecutive ones with one reason in one row."""
    if not times:
        return []
    why = [r for _, _, r in reasons] if reasons is not None else [reason or ""] * len(times)
    rows: list[dict[str, Any]] = []
    for (nominal, due), text in zip(times, why, strict=True):
        if rows and rows[-1]["reason"] == text:
            rows[-1]["until_ms"] = nominal
            rows[-1]["count"] += 1
            continue
        rows.append(
            {
                "schedule": name,
                "nominal_ms": nominal,
                "until_ms": nominal,
                "count": 1,
                "due_ms": due,
                "outcome": "SKIPPED",
                "reason": text,
                "instance_id": None,
                "triggered": False,
                "decided_at_ms": now,
                "started_at_ms": None,
            }
        )
    conn.execute(insert(_f), rows)
    return rows


def start_buffered(
    ctx: OpsContext, conn: Connection, *, name: str, check_input: CheckInput
) -> bool:
    """Start the oldest buffered fire of a schedule whose running instance has ended."""
    row = _locked(ctx, conn, name)
    if row is None or row.buffered <= 0 or row.paused:
        return False
    now = _now(conn, ctx)
    schedule = parsed(row.document)
    round_ = _Round(ctx, conn, schedule, check_input, now, row.running_id, 0)
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
            _observed(ctx, conn, schedule.flow, [{**fire._asdict(), "decided_at_ms": now}])
    moved = conn.execute(
        update(_s)
        .where(_s.c.name == name, _s.c.buffered == row.buffered)
        .values(**values, updated_at_ms=now)
    )
    if moved.rowcount != 1:
        raise FenceLost(f"schedule {name}: its buffer moved under this transaction")
    return True


def trigger(
    ctx: OpsContext, conn: Connection, *, name: str, check_input: CheckInput
) -> dict[str, Any]:
    """Fire the schedule now, once, under its overlap policy (paused or not): the nominal
    time is now, to the second. Its fire row, as recorded."""
    row = _locked(ctx, conn, name)
    if row is None:
        raise ScheduleNotFound(name)
    now = _now(conn, ctx)
    nominal = now - now % 1000
    if conn.execute(
        select(func.count()).where(_f.c.schedule == name, _f.c.nominal_ms == nominal)
    ).scalar():
        raise InvalidRequest(
            f"schedule {name} already fired for {rfc3339(nominal)}; trigger again in a second"
        )
    schedule = parsed(row.document)
    round_ = _Round(ctx, conn, schedule, check_input, now, row.running_id, int(row.buffered))
    fired = round_.fire(nominal, now, triggered=True)
    if fired:
        conn.execute(insert(_f), [fired])
        result = fired
        _observed(ctx, conn, schedule.flow, [fired])
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
        _observed(ctx, conn, schedule.flow, [result])
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


# -- backfill -------------------------------------------------------------------------------------

#: The most nominal times one backfill may fire (split a longer range into several).
MAX_BACKFILL = 10_000

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
    now = _now(conn, ctx)
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
    row = _locked(ctx, conn, name)
    if row is None:
        raise Skip(f"schedule {name} was deleted")
    known = conn.execute(
        select(_f.c.outcome).where(_f.c.schedule == name, _f.c.nominal_ms == nominal)
    ).scalar()
    if known is not None:
        raise Skip(f"already decided: {known}")
    now = _now(conn, ctx)
    schedule = parsed(row.document)
    running = row.running_id
    skips_overlap = params.get("overlap") == "skip" and running is not None
    if skips_overlap and status_of(conn, running) is InstanceStatus.RUNNING:
        raise Skip(f"overlap: {running} is still running")
    round_ = _Round(ctx, conn, schedule, ctx.check_input, now, None, 0)
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
    _observed(ctx, conn, schedule.flow, [fire])
    return f"started {started}"
