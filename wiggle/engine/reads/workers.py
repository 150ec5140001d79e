"""Workers the server has seen polling: who serves which queues with which activities.

A poll must not cost a write, so each server process keeps in memory when it last wrote each
worker's row and writes again only after `WRITE_EVERY_MS`, or at once when what the worker says
about itself (queues, activities, slots, sdk) changed. A worker inside a long poll is re-noted at
every slice of the poll, so `last_poll_ms` of a polling worker is never older than that interval
plus one slice, whichever server process it polls.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy import Connection, literal_column, select
from sqlalchemy.dialects import postgresql, sqlite

from ..model.types import WorkerSeen
from ..store import schema as s
from ..store.db import Database

__all__ = [
    "POLLING_WINDOW_MS",
    "WRITE_EVERY_MS",
    "WorkerBook",
    "WorkerNote",
    "list_workers",
    "recent_workers",
]

_w = s.workers

#: At most one write per worker per server process this often (unless its identity changed).
WRITE_EVERY_MS = 5_000
#: A worker whose last poll is this recent counts as polling (for `wiggle workers` and status).
POLLING_WINDOW_MS = 30_000
#: How far back `describe` looks for workers that once served a queue (to name the last one).
_RECENT_MS = 24 * 3600 * 1000
_RECENT_LIMIT = 1000
#: Forget (in memory) workers not seen for this long, so the book stays small.
_FORGET_MS = 10 * 60 * 1000


@dataclass(frozen=True)
class WorkerNote:
    """What a PollTasks says about the worker sending it."""

    worker_id: str
    queues: tuple[str, ...]
    activities: tuple[str, ...]
    slots: int
    sdk: str


class WorkerBook:
    """Decides which polls write the worker's row (see the module docstring). Thread-safe."""

    def __init__(self, every_ms: int = WRITE_EVERY_MS) -> None:
        self._every_ms = every_ms
        self._lock = threading.Lock()
        self._written: dict[str, tuple[float, WorkerNote]] = {}

    def due(self, note: WorkerNote) -> bool:
        """True when this poll should write the row (and counts it as written)."""
        now = time.monotonic() * 1000
        with self._lock:
            last = self._written.get(note.worker_id)
            if last is not None and last[1] == note and now - last[0] < self._every_ms:
                return False
            self._written[note.worker_id] = (now, note)
            if len(self._written) > 10_000:
                self._written = {k: v for k, v in self._written.items() if now - v[0] < _FORGET_MS}
            return True

    def forget(self, worker_id: str) -> None:
        """The write failed: try again at the next poll."""
        with self._lock:
            self._written.pop(worker_id, None)


def upsert(conn: Connection, db: Database, note: WorkerNote) -> None:
    now: Any = literal_column(db.now_sql)
    values = {
        "queues": orjson.dumps(list(note.queues)).decode(),
        "activities": orjson.dumps(sorted(note.activities)).decode(),
        "slots": note.slots,
        "sdk": note.sdk,
        "last_poll_ms": now,
    }
    dialect: Any = sqlite if db.is_sqlite else postgresql
    stmt = dialect.insert(_w).values(worker_id=note.worker_id, first_seen_ms=now, **values)
    conn.execute(stmt.on_conflict_do_update(index_elements=[_w.c.worker_id], set_=values))


def _seen(row: Any) -> WorkerSeen:
    return WorkerSeen(
        worker_id=row.worker_id,
        queues=tuple(orjson.loads(row.queues)),
        activities=tuple(orjson.loads(row.activities)),
        slots=int(row.slots),
        sdk=row.sdk,
        first_seen_ms=int(row.first_seen_ms),
        last_poll_ms=int(row.last_poll_ms),
    )


def list_workers(conn: Connection, db: Database, within_ms: int) -> tuple[list[WorkerSeen], int]:
    """Workers whose last poll is at most `within_ms` old, by id; and the database's now."""
    now = int(conn.execute(select(db.now)).scalar_one())
    rows = conn.execute(
        select(*_w.c).where(_w.c.last_poll_ms >= now - within_ms).order_by(_w.c.worker_id)
    ).all()
    return [_seen(r) for r in rows], now


def recent_workers(conn: Connection) -> list[WorkerSeen]:
    """Workers seen in the last day, newest first (bounded): what status explanations consult."""
    newest = select(_w.c.last_poll_ms).order_by(_w.c.last_poll_ms.desc()).limit(1)
    top = conn.execute(newest).scalar()
    if top is None:
        return []
    rows = conn.execute(
        select(*_w.c)
        .where(_w.c.last_poll_ms >= int(top) - _RECENT_MS)
        .order_by(_w.c.last_poll_ms.desc())
        .limit(_RECENT_LIMIT)
    ).all()
    return [_seen(r) for r in rows]
