"""The engine's schedules (docs/schedules.md): applying, pausing, triggering and deleting them,
and reading them back. Mixed into `Engine`; the leader fires them (ops/ticker.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection, select

from wiggle.errors import DefinitionNotFound, InvalidRequest
from wiggle.graph import Graph
from wiggle.schedules import Schedule, fire_input, instance_id, nominal_times

from .model.types import Json
from .ops import backfill as _backfill
from .ops import bulk as _bulk
from .ops import schedules as _schedules
from .ops.backfill import BackfillPreview
from .ops.context import OpsContext
from .ops.schedules import Applied, ScheduleNotFound
from .reads import schedules as _views
from .reads.schedules import ScheduleView
from .store import schema as s
from .store.db import Database
from .store.wakeups import Waiters

__all__ = ["ScheduleNotFound", "Schedules"]

_d = s.definitions


class Schedules:
    """What `Engine` does with schedules. It provides `db`, `ops`, `graph_of`, `waiters` and
    `_check_input`."""

    db: Database
    ops: OpsContext
    waiters: Waiters
    graph_of: Callable[[Connection, str], Graph]
    _check_input: Callable[[Graph, Json], None]

    def apply_schedule(self, schedule: Schedule) -> Applied:
        """Create or update a schedule. Its flow must be registered (the pinned version, or
        any for `latest`) and take its input, as the first fire would build it."""

        def fn(conn: Connection) -> Applied:
            self._check_flow(conn, schedule)
            return _schedules.apply(self.ops, conn, schedule)

        applied = self.db.write(fn)
        self.waiters.ticker_needed()  # its first fire may be sooner than the ticker's next wake
        return applied

    def _check_flow(self, conn: Connection, schedule: Schedule) -> None:
        q = select(_d.c.version, _d.c.name)
        if schedule.version is not None:
            q = q.where(_d.c.version == schedule.version)
        else:
            q = q.where(_d.c.name == schedule.flow).order_by(_d.c.seq.desc()).limit(1)
        row = conn.execute(q).first()
        if row is None or row.name != schedule.flow:
            raise DefinitionNotFound(schedule.flow, schedule.version)
        now = int(self.db.first_rows(conn, f"SELECT {self.db.now_sql}", {})[0][0])
        nominal = next(iter(nominal_times(schedule.spec, now)), now)
        ident = instance_id(schedule.name, nominal)
        try:
            data = fire_input(schedule, ident, nominal, now)
        except Exception as exc:  # an input_values expression failing on its first fire
            raise InvalidRequest(f"schedule {schedule.name}: input_values: {exc}") from None
        self._check_input(self.graph_of(conn, row.version), data)

    def delete_schedule(self, name: str) -> None:
        self.db.write(lambda c: _schedules.delete_schedule(self.ops, c, name))

    def pause_schedule(self, name: str, note: str = "") -> None:
        self.db.write(lambda c: _schedules.set_paused(self.ops, c, name, True, note))

    def unpause_schedule(self, name: str, note: str = "") -> None:
        self.db.write(lambda c: _schedules.set_paused(self.ops, c, name, False, note))
        self.waiters.ticker_needed()

    def trigger_schedule(self, name: str) -> dict[str, Any]:
        """Fire the schedule now, once, under its overlap policy; the fire as recorded."""
        return self.db.write(
            lambda c: _schedules.trigger(self.ops, c, name=name, check_input=self._check_input)
        )

    def list_schedules(self, flow: str | None = None) -> list[ScheduleView]:
        return self.db.read(lambda c: _views.list_schedules(c, flow))

    def describe_schedule(self, name: str, *, upcoming: int = 10, recent: int = 20) -> ScheduleView:
        view = self.db.read(
            lambda c: _views.describe_schedule(c, name, upcoming=upcoming, recent=recent)
        )
        if view is None:
            raise ScheduleNotFound(name)
        return view

    def schedule_fires(self, name: str) -> list[_views.Fire]:
        """Every fire the schedule recorded, oldest nominal time first (a run of skipped
        times is one record, `count` of them up to `until_ms`)."""
        return self.db.read(lambda c: _views.all_fires(c, name))

    def schedule_of_instance(self, instance_id: str) -> tuple[str, int] | None:
        """The schedule and nominal time (ms) that started an instance, if one did."""
        return self.db.read(lambda c: _views.fire_of_instance(c, instance_id))

    def preview_backfill(self, name: str, from_ms: int, to_ms: int) -> BackfillPreview:
        """The nominal times of [from, to] a backfill would fire (the ones not yet decided)."""
        return self.db.read(lambda c: _backfill.preview_backfill(self.ops, c, name, from_ms, to_ms))

    def start_backfill(
        self,
        name: str,
        from_ms: int,
        to_ms: int,
        *,
        overlap: str = "allow_all",
        requested_by: str = "",
        rate_per_s: float = _bulk.DEFAULT_RATE,
    ) -> _bulk.BatchView:
        """Fire the past nominal times of [from, to] that are not decided yet, each once, as a
        durable bulk action (`backfill`) that the leading server works through at `rate_per_s`
        and a new leader resumes. `overlap`: `allow_all` (the default) starts every time; `skip`
        skips a time while the schedule's last instance runs."""
        if overlap not in _backfill.BACKFILL_OVERLAP:
            raise InvalidRequest(
                f"a backfill's overlap is one of {', '.join(_backfill.BACKFILL_OVERLAP)}; "
                f"got {overlap[:40]!r}"
            )

        def fn(conn: Connection) -> str:
            preview = _backfill.preview_backfill(self.ops, conn, name, from_ms, to_ms)
            if not preview.count:
                raise InvalidRequest(
                    f"schedule {name} has no undecided nominal time in that range: nothing to do"
                )
            params: dict[str, Json] = {
                "schedule": name,
                "overlap": overlap,
                "from_ms": from_ms,
                "to_ms": to_ms,
            }
            return _bulk.create_batch(
                self.ops,
                conn,
                "backfill",
                params,
                [f"schedule={name}"],
                requested_by or "anonymous",
                rate_per_s,
                items=_backfill.backfill_items(preview),
            )

        batch_id = self.db.write(fn)
        self.waiters.ticker_needed()
        return self.db.read(lambda c: _bulk.get_batch(c, batch_id))
