"""The schedule calls of `Client` (docs/schedules.md, docs/admin-api.md): apply, list, describe,
pause, unpause, trigger and delete, with what they return. Like every admin call, they need a
credential with the `admin` or `operator` scope."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from wiggle import errors
from wiggle._proto.wiggle.v1 import admin_pb2 as apb
from wiggle.client._admin import Batch, batch_from_pb

if TYPE_CHECKING:
    from wiggle.schedules import Schedule

__all__ = ["AppliedSchedule", "BackfillPreview", "ScheduleCalls", "ScheduleFire", "ScheduleInfo"]


@dataclass(frozen=True)
class AppliedSchedule:
    """What applying a schedule did: created it, changed these top-level fields of its
    document, or nothing (neither: the same document again)."""

    name: str
    created: bool
    changed: list[str]
    next_due_ms: int | None  # None: it does not fire (paused, or past its end)
    next_due: str  # the same, RFC 3339 in the schedule's zone ("" for None)

    @property
    def unchanged(self) -> bool:
        return not self.created and not self.changed


@dataclass(frozen=True)
class ScheduleFire:
    """One decided nominal time (or a run of `count` skipped ones, up to `until_ms`)."""

    nominal_ms: int
    until_ms: int
    count: int
    due_ms: int
    outcome: str  # STARTED | BUFFERED | SKIPPED
    reason: str
    instance_id: str | None
    triggered: bool
    decided_at_ms: int


@dataclass(frozen=True)
class ScheduleInfo:
    """A schedule as the server holds it; `upcoming` and `recent` come with describe (and the
    answers of pause and unpause), not with the list."""

    name: str
    flow: str
    document: dict[str, Any]
    digest: str
    paused: bool
    note: str
    time_zone: str
    next_due_ms: int | None  # None: it does not fire (paused, or past its end)
    running_instance_id: str | None
    buffered: int
    fired: int
    skipped: int
    created_at_ms: int
    updated_at_ms: int
    upcoming: list[str] = field(default_factory=list)  # RFC 3339 in its zone, with the offset
    recent: list[ScheduleFire] = field(default_factory=list)  # newest decided first


def _fire(f: apb.ScheduleFire) -> ScheduleFire:
    return ScheduleFire(
        nominal_ms=f.nominal_ms,
        until_ms=f.until_ms,
        count=f.count,
        due_ms=f.due_ms,
        outcome=f.outcome,
        reason=f.reason,
        instance_id=f.instance_id or None,
        triggered=f.triggered,
        decided_at_ms=f.decided_at_ms,
    )


def _schedule(s: apb.Schedule) -> ScheduleInfo:
    return ScheduleInfo(
        name=s.name,
        flow=s.flow,
        document=orjson.loads(s.document) if s.document else {},
        digest=s.digest,
        paused=s.paused,
        note=s.note,
        time_zone=s.time_zone,
        next_due_ms=s.next_due_ms or None,
        running_instance_id=s.running_instance_id or None,
        buffered=s.buffered,
        fired=s.fired,
        skipped=s.skipped,
        created_at_ms=s.created_at_ms,
        updated_at_ms=s.updated_at_ms,
        upcoming=list(s.upcoming),
        recent=[_fire(f) for f in s.recent],
    )


@dataclass(frozen=True)
class BackfillPreview:
    """What a backfill of a range would fire: its nominal times not decided yet, oldest first,
    and how many in the range are decided already (left alone)."""

    name: str
    nominal_ms: list[int]
    already: int
    time_zone: str


class ScheduleCalls:
    """Mixed into `Client`: it provides `_admin` (the WiggleAdmin stub) and `_call`."""

    _admin: Any
    _call: Callable[..., Any]

    def apply_schedule(
        self, schedule: str | os.PathLike[str] | bytes | Schedule, *, filename: str = ""
    ) -> AppliedSchedule:
        """Create or update a schedule from its document: a path to a `.schedule.yaml` file, the
        document's bytes, or a `wiggle.schedules.Schedule`. The server checks it (FlowError with
        every problem at FILE:LINE:COL), and that its flow is registered (DefinitionNotFound)
        and takes its input (InputRejected). The same document again changes nothing."""
        if isinstance(schedule, bytes):
            source, name = schedule, filename or "<schedule>"
        elif isinstance(schedule, str | os.PathLike):
            path = Path(schedule)
            try:
                source = path.read_bytes()
            except OSError as exc:
                raise errors.InvalidRequest(f"cannot read {path}: {exc.strerror}") from None
            name = filename or str(path)
        else:
            source, name = orjson.dumps(schedule.document), filename or f"<{schedule.name}>"
        request = apb.ApplyScheduleRequest(source=source, filename=name)
        r = self._call(self._admin.ApplySchedule, request, idempotent=True)
        due = r.next_due_ms or None
        return AppliedSchedule(r.name, r.created, list(r.changed), due, r.next_due)

    def list_schedules(self, flow: str | None = None) -> list[ScheduleInfo]:
        """Every schedule (of `flow`), by name."""
        request = apb.ListSchedulesRequest(flow=flow or "")
        response = self._call(self._admin.ListSchedules, request, idempotent=True)
        return [_schedule(s) for s in response.schedules]

    def describe_schedule(self, name: str, *, upcoming: int = 10, recent: int = 20) -> ScheduleInfo:
        """A schedule with its next `upcoming` fire times in its zone and its last `recent`
        fires (ScheduleNotFound for an unknown name)."""
        request = apb.DescribeScheduleRequest(name=name, upcoming=upcoming, recent=recent)
        return _schedule(self._call(self._admin.DescribeSchedule, request, idempotent=True))

    def pause_schedule(self, name: str, note: str = "") -> ScheduleInfo:
        """Nothing fires until it is unpaused; `note` says why. The schedule as it is now."""
        request = apb.PauseScheduleRequest(name=name, note=note)
        return _schedule(self._call(self._admin.PauseSchedule, request, idempotent=True))

    def unpause_schedule(self, name: str) -> ScheduleInfo:
        """The timetable goes on from now (the times that passed while paused are skipped)."""
        request = apb.UnpauseScheduleRequest(name=name)
        return _schedule(self._call(self._admin.UnpauseSchedule, request, idempotent=True))

    def trigger_schedule(self, name: str) -> ScheduleFire:
        """Fire now, once, under the schedule's overlap policy: the fire as recorded (STARTED
        with its instance, or BUFFERED or SKIPPED with the reason)."""
        request = apb.TriggerScheduleRequest(name=name)
        # Not retried: a trigger that did arrive would fire again a second later.
        return _fire(self._call(self._admin.TriggerSchedule, request, idempotent=False))

    def delete_schedule(self, name: str) -> None:
        """Delete the schedule and its record of fires; the instances it started stay."""
        request = apb.DeleteScheduleRequest(name=name)
        # Not retried: a delete that did arrive would be answered ScheduleNotFound.
        self._call(self._admin.DeleteSchedule, request, idempotent=False)

    def preview_backfill(self, name: str, from_ms: int, to_ms: int) -> BackfillPreview:
        """The past nominal times of [from, to] a backfill would fire; changes nothing."""
        request = apb.BackfillRequest(name=name, from_ms=from_ms, to_ms=to_ms)
        r = self._call(self._admin.PreviewBackfill, request, idempotent=True)
        return BackfillPreview(r.name, list(r.nominal_ms), r.already, r.time_zone)

    def start_backfill(
        self,
        name: str,
        from_ms: int,
        to_ms: int,
        *,
        overlap: str = "allow_all",
        rate_per_s: float = 0.0,
        requested_by: str = "",
    ) -> Batch:
        """Fire those times, each once, as a durable bulk action (follow it with get_batch)."""
        request = apb.BackfillRequest(
            name=name,
            from_ms=from_ms,
            to_ms=to_ms,
            overlap=overlap,
            rate_per_s=rate_per_s,
            requested_by=requested_by,
        )
        # Not retried: a batch that was recorded would be recorded twice.
        return batch_from_pb(self._call(self._admin.StartBackfill, request, idempotent=False))
