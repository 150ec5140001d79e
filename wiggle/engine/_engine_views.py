"""The engine's reads: instances, definitions, operator aggregates, waiting for an end, and
the workers it has seen. Mixed into `Engine` (docs/internals.md)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from sqlalchemy import Connection

from wiggle.errors import InstanceNotFound
from wiggle.graph import Graph

from .model.types import (
    DefinitionSummary,
    InstanceFilter,
    InstancePage,
    InstanceStatus,
    InstanceView,
    WorkerSeen,
)
from .ops import instances as _instances
from .reads import describe as _describe
from .reads import listing as _listing
from .reads import overview as _overview
from .reads import workers as _workers
from .reads.overview import IncidentPage, NodeCount, QueueStats
from .reads.workers import POLLING_WINDOW_MS, WorkerBook, WorkerNote
from .store.db import Database
from .store.wakeups import Waiters

__all__ = ["FINISH_RECHECK_S", "Views"]

#: How often a process re-reads the instances its WaitInstance calls wait for: an instance
#: finished by another server process wakes no waiter here. One query covers every waiter.
FINISH_RECHECK_S = 0.25


class Views:
    """What `Engine` shows. It provides `db`, `graph_of`, `waiters` and the state below."""

    db: Database
    waiters: Waiters
    graph_of: Callable[[Connection, str], Graph]
    _stop: threading.Event
    _recheck_lock: threading.Lock
    _rechecked_at: float
    _workers: WorkerBook

    def describe(self, instance_id: str, *, include_events: bool = False) -> InstanceView:
        """The instance with its current context and every token's context and explanation."""
        return self.db.read(
            lambda c: _describe.describe(c, instance_id, include_events, self.graph_of, self.db.now)
        )

    def find_instances(
        self,
        where: InstanceFilter | None = None,
        *,
        limit: int = 100,
        page_token: str = "",
        counts: bool = False,
    ) -> InstancePage:
        """Instances matching `where`, newest first; `page_token` continues a previous page.
        With `counts`, how many match per status (the filter without its status)."""
        f = where or InstanceFilter()
        return self.db.read(
            lambda c: _listing.find_instances(
                c, f, limit, page_token, counts, self.graph_of, self.db.now_sql
            )
        )

    def list_definitions(
        self, name: str | None = None, *, include_counts: bool = False
    ) -> list[DefinitionSummary]:
        """Registered versions, by name, the newest version of each name first."""
        return self.db.read(
            lambda c: _listing.list_definitions(c, name, include_counts, self.graph_of)
        )

    # -- read-only aggregates for operators (engine/reads/overview.py) ----------------------------

    def queue_stats(self) -> list[QueueStats]:
        """Every queue holding READY or leased tasks: how many, and since when the oldest
        READY one waits."""
        return self.db.read(_overview.queue_stats)

    def node_counts(self, version: str) -> list[NodeCount]:
        """Where the instances of `version` stand: RUNNING ones per node and live token state,
        FAILED ones at the node they failed at."""
        return self.db.read(lambda c: _overview.node_counts(c, version))

    def incidents(
        self, *, flow: str = "", version: str = "", failed_after_ms: int = 0, limit: int = 100
    ) -> IncidentPage:
        """FAILED instances grouped by flow, node and reason, the largest group first."""
        return self.db.read(lambda c: _overview.incidents(c, flow, version, failed_after_ms, limit))

    def ready_by_queue(self) -> dict[str, int]:
        """Tokens READY for a worker now, per queue (metrics)."""
        return self.db.read(_listing.ready_by_queue)

    def wait_view(
        self,
        instance_id: str,
        timeout_s: float,
        *,
        include_events: bool = False,
        keep_waiting: Callable[[], bool] = lambda: True,
    ) -> InstanceView:
        """The instance once it is no longer RUNNING, or as it is after `timeout_s` (or as soon
        as `keep_waiting()`, asked every FINISH_RECHECK_S, says no). Reads only, never a write.

        Woken at once when this process commits its end, and then the view is read straight
        away (the wake-up says the end committed: no status read before it). An end committed
        by another process is seen at the next shared re-read (every FINISH_RECHECK_S).
        """
        if timeout_s <= 0:
            return self.describe(instance_id, include_events=include_events)
        deadline = time.monotonic() + timeout_s
        event = self.waiters.watch(instance_id)  # before the first read: no end slips between
        try:
            status = self.db.read(lambda c: _instances.status_of(c, instance_id))
            if status is None:
                raise InstanceNotFound(instance_id)
            while status is InstanceStatus.RUNNING and not self._stop.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                if event.wait(min(left, FINISH_RECHECK_S)):
                    event.clear()
                    view = self.describe(instance_id, include_events=include_events)
                    if view.status is not InstanceStatus.RUNNING:
                        return view
                    continue  # woken for an end that a retry or reset has undone since
                if not keep_waiting():
                    break
                # Each waiter does not read on its own while it waits: one shared re-read
                # wakes those whose instance another process ended.
                self._recheck_waited_instances()
        finally:
            self.waiters.unwatch(instance_id, event)
        return self.describe(instance_id, include_events=include_events)

    def _recheck_waited_instances(self) -> None:
        """One read for every instance this process's waiters wait for, at most once per
        FINISH_RECHECK_S whoever asks: those another process ended wake their waiters."""
        with self._recheck_lock:
            now = time.monotonic()
            if now - self._rechecked_at < FINISH_RECHECK_S:
                return  # another waiter has just read for everyone
            self._rechecked_at = now
        watched = self.waiters.watched()
        if watched:
            self.waiters.instances_ended(self.db.read(lambda c: _instances.ended_among(c, watched)))

    def list_instances(
        self,
        *,
        flow: str | None = None,
        status: InstanceStatus | None = None,
        limit: int = 100,
        after: str | None = None,
    ) -> list[InstanceView]:
        """Instances ordered by id; `after` is the last id of the previous page."""
        return self.db.read(lambda c: _listing.list_instances(c, flow, status, limit, after))

    # -- workers --------------------------------------------------------------------------------

    def note_worker(self, note: WorkerNote) -> None:
        """A worker polled: record it, at most every few seconds per worker (see
        wiggle.engine.reads.workers)."""
        if not self._workers.due(note):
            return
        try:
            self.db.write(lambda c: _workers.upsert(c, self.db, note))
        except Exception:
            self._workers.forget(note.worker_id)
            raise

    def list_workers(self, within_ms: int = POLLING_WINDOW_MS) -> tuple[list[WorkerSeen], int]:
        """Workers whose last poll is at most `within_ms` old, and the database's clock."""
        return self.db.read(lambda c: _workers.list_workers(c, self.db, within_ms))
