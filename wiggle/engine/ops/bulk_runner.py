"""The leader's share of bulk actions (and migrations): working through their items.

Each item's action runs in one transaction with the item's change from PENDING to DONE, guarded
by the item still being PENDING (see bulk for why that makes each action happen at most once
and lose none). An action the instance's state refuses marks its item SKIPPED; one that must
wait (a migration whose instance has a step on a worker) leaves it PENDING until a later time.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from typing import Any

from sqlalchemy import Connection, literal_column, select, update

from wiggle.errors import Unavailable, WiggleError

from ..machine.tx import dumps, loads
from ..model.types import Json
from ..store import schema as s
from ..store.transition import FenceLost
from .actions import ACTIONS, Defer
from .bulk import DONE, FAILED, FINISHED, ITEMS_PER_TICK, PENDING, RUNNING, SKIPPED
from .context import OpsContext

__all__ = ["BulkRunner"]

_log = logging.getLogger("wiggle.engine")

_b = s.batches
_bi = s.batch_items


# -- working through items (the leader) ---------------------------------------------------------


class _Taken(Exception):
    """Another server's transaction handled the item first."""


class BulkRunner:
    """The leader's share of bulk actions: a few items per batch per tick, at each batch's
    rate (a token bucket per batch, in this process: a new leader starts with an empty one)."""

    def __init__(self, ctx: OpsContext) -> None:
        self._ctx = ctx
        self._buckets: dict[str, tuple[float, float]] = {}  # batch id -> (tokens, at)
        self._lock = threading.Lock()
        self.busy = False  # a batch had items left after the last tick

    def tick(self) -> int:
        ctx = self._ctx
        running = ctx.db.read(
            lambda c: c.execute(
                select(_b.c.id, _b.c.action, _b.c.params, _b.c.rate_per_s, _b.c.requested_by)
                .where(_b.c.state == RUNNING)
                .order_by(_b.c.created_at_ms)
            ).all()
        )
        work = 0
        busy = False
        for row in running:
            budget = self._take(row.id, float(row.rate_per_s))
            if budget <= 0:
                busy = True
                continue
            items = ctx.db.read(
                functools.partial(_pending, batch_id=row.id, limit=budget, now_sql=ctx.db.now_sql)
            )
            if not items:
                finished = ctx.db.write(
                    functools.partial(_finish, now_sql=ctx.db.now_sql, batch_id=row.id)
                )
                if finished:
                    self._buckets.pop(row.id, None)
                else:
                    busy = True  # deferred items wait for their time
                continue
            params = loads(row.params)
            by = f"batch {row.id[:12]} ({row.requested_by})"
            for item in items:
                detail = None if item.detail is None else loads(item.detail)
                work += self._apply(
                    row.id, row.action, item.seq, item.instance_id, params, detail, by
                )
            self._spend(row.id, len(items))
            busy = True
        self.busy = busy
        return work

    def _take(self, batch_id: str, rate: float) -> int:
        """How many items this batch may take now."""
        now = time.monotonic()
        with self._lock:
            tokens, at = self._buckets.get(batch_id, (min(rate, 1.0), now))
            tokens = min(max(rate, 1.0), tokens + (now - at) * rate)
            self._buckets[batch_id] = (tokens, now)
        return min(ITEMS_PER_TICK, int(tokens))

    def _spend(self, batch_id: str, n: int) -> None:
        with self._lock:
            tokens, at = self._buckets.get(batch_id, (0.0, time.monotonic()))
            self._buckets[batch_id] = (tokens - n, at)

    def _apply(
        self,
        batch_id: str,
        action: str,
        seq: int,
        instance_id: str,
        params: dict[str, Json],
        detail: Json,
        by: str,
    ) -> int:
        ctx = self._ctx
        fn = ACTIONS[action].run

        def run(conn: Connection) -> str:
            _claim(conn, ctx.db.now_sql, batch_id, seq, DONE, "")
            got = fn(ctx, conn, instance_id, params, detail, by)
            message, undo = got if isinstance(got, tuple) else (got, None)
            _count(conn, ctx.db.now_sql, batch_id, DONE)
            conn.execute(
                update(_bi)
                .where(_bi.c.batch_id == batch_id, _bi.c.seq == seq)
                .values(message=message[:500], undo=None if undo is None else dumps(undo))
            )
            return message

        try:
            ctx.db.write(run)
            return 1
        except (_Taken, Unavailable, FenceLost):
            return 0  # handled elsewhere, or to try again at a later tick: still PENDING
        except Defer as exc:
            ctx.db.write(
                functools.partial(
                    _defer, now_sql=ctx.db.now_sql, batch_id=batch_id, seq=seq, message=str(exc)
                )
            )
            return 0
        except WiggleError as exc:
            outcome, message = SKIPPED, str(exc)
        except Exception as exc:  # a defect: recorded on the item, the batch goes on
            _log.exception("bulk action %s on instance %s failed", batch_id, instance_id)
            outcome, message = FAILED, f"{type(exc).__name__}: {exc}"

        def mark(conn: Connection) -> None:
            _claim(conn, ctx.db.now_sql, batch_id, seq, outcome, message)
            _count(conn, ctx.db.now_sql, batch_id, outcome)

        try:
            ctx.db.write(mark)
        except (_Taken, Unavailable):
            return 0
        return 1


def _claim(conn: Connection, now_sql: str, batch_id: str, seq: int, state: str, msg: str) -> None:
    """Turn a PENDING item into `state`, or raise _Taken when it is no longer PENDING (another
    transaction handled it; on PostgreSQL this waits for that one to end, then sees it)."""
    done = conn.execute(
        update(_bi)
        .where(_bi.c.batch_id == batch_id, _bi.c.seq == seq, _bi.c.state == PENDING)
        .values(state=state, message=msg[:500], at_ms=literal_column(now_sql))
    )
    if done.rowcount != 1:
        raise _Taken()


def _count(conn: Connection, now_sql: str, batch_id: str, outcome: str) -> None:
    column = {DONE: _b.c.done, SKIPPED: _b.c.skipped, FAILED: _b.c.failed}[outcome]
    conn.execute(
        update(_b)
        .where(_b.c.id == batch_id)
        .values({column.name: column + 1, "updated_at_ms": literal_column(now_sql)})
    )


def _pending(conn: Connection, *, batch_id: str, limit: int, now_sql: str) -> list[Any]:
    """PENDING items whose time has come (a deferred one waits until its at_ms)."""
    return list(
        conn.execute(
            select(_bi.c.seq, _bi.c.instance_id, _bi.c.detail)
            .where(
                _bi.c.batch_id == batch_id,
                _bi.c.state == PENDING,
                (_bi.c.at_ms.is_(None)) | (_bi.c.at_ms <= literal_column(now_sql)),
            )
            .order_by(_bi.c.seq)
            .limit(limit)
        ).all()
    )


#: How long a deferred item waits before it is tried again.
DEFER_MS = 500


def _defer(conn: Connection, *, now_sql: str, batch_id: str, seq: int, message: str) -> None:
    conn.execute(
        update(_bi)
        .where(_bi.c.batch_id == batch_id, _bi.c.seq == seq, _bi.c.state == PENDING)
        .values(message=message[:500], at_ms=literal_column(now_sql) + DEFER_MS)
    )


def _finish(conn: Connection, *, now_sql: str, batch_id: str) -> bool:
    """When no item is left PENDING the batch is DONE (True); False while some wait."""
    left = conn.execute(
        select(_bi.c.seq).where(_bi.c.batch_id == batch_id, _bi.c.state == PENDING).limit(1)
    ).first()
    if left is None:
        now: Any = literal_column(now_sql)
        conn.execute(
            update(_b)
            .where(_b.c.id == batch_id, _b.c.state == RUNNING)
            .values(state=FINISHED, finished_at_ms=now, updated_at_ms=now)
        )
        return True
    return False
