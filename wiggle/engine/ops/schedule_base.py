"""What every schedule operation shares (docs/schedules.md): the stored document, the row read
under lock, the next due time, and one round of decisions: each fire under the overlap policy,
its instance started, skipped runs recorded, and the fires handed to the event observers (the
server's metrics) once the transaction commits."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, insert, select

from wiggle.errors import WiggleError
from wiggle.expressions import EvaluationError
from wiggle.graph import Graph
from wiggle.schedules import (
    Schedule,
    fire_input,
    instance_id,
    jitter_ms,
    nominal_times,
    overlap,
)

from ..machine.starts import StartRequest, apply_starts
from ..model.types import InstanceStatus, Json
from ..store import schema as s
from ..store.rows import dumps
from .context import OpsContext
from .instances import cancel, status_of

__all__ = [
    "MAX_DECIDED_AT_ONCE",
    "CheckInput",
    "Round",
    "locked",
    "next_due",
    "now_ms",
    "observed",
    "parsed",
    "reason_kind",
    "record_skips",
]

_s = s.schedules
_f = s.schedule_fires

#: The most nominal times one transaction decides; a longer backlog (a schedule firing every
#: second after an hour without a server) is decided over the next ticks.
MAX_DECIDED_AT_ONCE = 1000

CheckInput = Callable[[Graph, Json], None]


def parsed(document: str) -> Schedule:
    """A stored document as a Schedule (checked when applied; cached by its text)."""
    # The schedule loader (jsonschema, the YAML reader) is loaded by the first schedule read,
    # not by every server's start.
    from wiggle.schedules import load_stored

    return load_stored(document)


def now_ms(conn: Connection, ctx: OpsContext) -> int:
    return int(ctx.db.first_rows(conn, f"SELECT {ctx.db.now_sql}", {})[0][0])


def next_due(schedule: Schedule, after_ms: int) -> int | None:
    for nominal in nominal_times(schedule.spec, after_ms):
        return nominal + jitter_ms(schedule.name, nominal, schedule.spec.jitter_ms)
    return None


def locked(ctx: OpsContext, conn: Connection, name: str) -> Any:
    q = select(_s).where(_s.c.name == name)
    if ctx.db.is_postgres:
        q = q.with_for_update()
    return conn.execute(q).first()


@dataclass
class Round:
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


def observed(ctx: OpsContext, conn: Connection, flow: str, rows: list[dict[str, Any]]) -> None:
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


def record_skips(
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
