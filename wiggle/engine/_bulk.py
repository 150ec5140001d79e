"""Bulk actions: cancel, retry, reset or signal every instance a filter matches, durably.

Creating one fixes the set of instances in the same transaction that records the action
(`wiggle_batches`, one `wiggle_batch_items` row per instance), so what runs is what the preview
counted. The leading server works through the items at the batch's rate: each instance's action
runs in one transaction together with its item turning DONE, guarded by the item still being
PENDING, so a crash (or a deposed leader racing the new one) can neither apply an action twice
nor lose one; whichever server leads next picks up the items still PENDING. An action the
instance's state refuses (a retry of an instance that is RUNNING again, a cancel of a finished
one) marks its item SKIPPED with the reason; an unexpected error marks it FAILED.
"""

from __future__ import annotations

import functools
import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, func, literal_column, select, update

from wiggle.errors import BatchNotFound, InvalidRequest, Unavailable, WiggleError
from wiggle.filters import Condition, parse_filter

from . import _instances, _repair
from . import _schema as s
from ._filtering import filter_clauses
from ._tx import FenceLost, dumps, loads, new_id
from ._types import InstanceStatus, Json

if TYPE_CHECKING:
    from ._engine import Engine

__all__ = [
    "ACTIONS",
    "BatchItemView",
    "BatchView",
    "BulkPreview",
    "BulkRunner",
    "Defer",
    "Skip",
    "create_batch",
    "preview",
]

_log = logging.getLogger("wiggle.engine")

_i = s.instances
_b = s.batches
_bi = s.batch_items

#: What a bulk action may do (a migration and its rollback are created by `migrate apply` and
#: `migrate rollback`, not here).
ACTIONS = ("cancel", "retry", "reset", "signal")
#: How many instances a preview names.
PREVIEW_IDS = 20
#: The most instances one bulk action may take (split a larger job by filter).
MAX_BATCH = 100_000
#: Instances per second when the caller does not say.
DEFAULT_RATE = 50.0
#: At most this many items per batch in one tick (the ticker comes back at once if more wait).
ITEMS_PER_TICK = 200

PENDING, DONE, SKIPPED, FAILED = "PENDING", "DONE", "SKIPPED", "FAILED"
RUNNING, PAUSED, FINISHED, CANCELLED = "RUNNING", "PAUSED", "DONE", "CANCELLED"


@dataclass(frozen=True)
class BulkPreview:
    """What a bulk action would touch: how many instances, per status, and the first ids."""

    matched: int
    by_status: dict[str, int]
    first_ids: list[str]


@dataclass(frozen=True)
class BatchItemView:
    instance_id: str
    state: str
    message: str
    at_ms: int


@dataclass(frozen=True)
class BatchView:
    """A bulk action (or a migration) and how far it got."""

    batch_id: str
    action: str
    params: dict[str, Json]
    filter: list[str]
    requested_by: str
    state: str  # RUNNING | PAUSED | DONE | CANCELLED
    rate_per_s: float
    matched: int
    done: int
    skipped: int
    failed: int
    created_at_ms: int
    updated_at_ms: int
    finished_at_ms: int
    items: list[BatchItemView] = field(default_factory=list)  # the skipped and failed ones

    @property
    def pending(self) -> int:
        return self.matched - self.done - self.skipped - self.failed


def _matching(
    conn: Connection,
    where: Sequence[Condition],
    graph_of: Callable[[Connection, str], Any],
    now_sql: str,
) -> list[Any]:
    if not where:
        raise InvalidRequest(
            "a bulk action needs a filter (for example --filter status=FAILED --filter "
            "flow=NAME); to act on every instance say so: --filter age>0ms"
        )
    return filter_clauses(conn, where, graph_of, now_sql)


def preview(
    conn: Connection,
    where: Sequence[Condition],
    graph_of: Callable[[Connection, str], Any],
    now_sql: str,
) -> BulkPreview:
    clauses = _matching(conn, where, graph_of, now_sql)
    by_status = {str(st): 0 for st in InstanceStatus}
    for status, n in conn.execute(
        select(_i.c.status, func.count()).where(*clauses).group_by(_i.c.status)
    ):
        by_status[status] = int(n)
    first = conn.execute(
        select(_i.c.id).where(*clauses).order_by(_i.c.created_at_ms, _i.c.id).limit(PREVIEW_IDS)
    ).scalars()
    return BulkPreview(sum(by_status.values()), by_status, list(first))


def check_params(action: str, params: dict[str, Json]) -> None:
    if action not in ACTIONS:
        raise InvalidRequest(f"unknown bulk action {action[:40]!r}; one of {', '.join(ACTIONS)}")
    if action == "reset" and not isinstance(params.get("node"), str):
        raise InvalidRequest("a bulk reset needs the node to reset to (--to NODE)")
    if action == "signal" and not isinstance(params.get("name"), str):
        raise InvalidRequest("a bulk signal needs the signal's name")


def create_batch(
    eng: Engine,
    conn: Connection,
    action: str,
    params: dict[str, Json],
    where_texts: Sequence[str],
    requested_by: str,
    rate_per_s: float,
    *,
    items: Sequence[tuple[str, Json]] | None = None,
) -> str:
    """Record a bulk action over what `where_texts` matches now (or over `items`, each with its
    own detail: a migration's plan entries). Returns the batch id."""
    if items is None:
        check_params(action, params)  # a plain action; a migration brings its own items
    if not (rate_per_s > 0) or math.isinf(rate_per_s):
        raise InvalidRequest("a bulk action's rate is a number of instances per second above 0")
    if items is None:
        where = parse_filter(where_texts)
        clauses = _matching(conn, where, eng.graph_of, eng.db.now_sql)
        ids = list(
            conn.execute(
                select(_i.c.id)
                .where(*clauses)
                .order_by(_i.c.created_at_ms, _i.c.id)
                .limit(MAX_BATCH + 1)
            ).scalars()
        )
        if not ids:
            raise InvalidRequest("the filter matches no instance: nothing to do")
        if len(ids) > MAX_BATCH:
            raise InvalidRequest(
                f"the filter matches more than {MAX_BATCH} instances; narrow it (age, flow) "
                "and run several"
            )
        items = [(iid, None) for iid in ids]
    now = int(conn.execute(select(eng.db.now)).scalar_one())
    batch_id = new_id()
    conn.execute(
        _b.insert().values(
            id=batch_id,
            action=action,
            params=dumps(params),
            filter=dumps(list(where_texts)),
            requested_by=requested_by[:200],
            state=RUNNING,
            rate_per_s=float(rate_per_s),
            matched=len(items),
            done=0,
            skipped=0,
            failed=0,
            created_at_ms=now,
            updated_at_ms=now,
            finished_at_ms=None,
        )
    )
    rows = [
        {
            "batch_id": batch_id,
            "seq": n,
            "instance_id": iid,
            "state": PENDING,
            "message": "",
            "detail": None if detail is None else dumps(detail),
            "undo": None,
            "at_ms": None,
        }
        for n, (iid, detail) in enumerate(items)
    ]
    for at in range(0, len(rows), 1000):
        conn.execute(_bi.insert(), rows[at : at + 1000])
    return batch_id


# -- reading ------------------------------------------------------------------------------------


def _view(row: Any, items: list[BatchItemView] | None = None) -> BatchView:
    m = row._mapping
    return BatchView(
        batch_id=m["id"],
        action=m["action"],
        params=loads(m["params"]),
        filter=loads(m["filter"]),
        requested_by=m["requested_by"],
        state=m["state"],
        rate_per_s=float(m["rate_per_s"]),
        matched=int(m["matched"]),
        done=int(m["done"]),
        skipped=int(m["skipped"]),
        failed=int(m["failed"]),
        created_at_ms=int(m["created_at_ms"]),
        updated_at_ms=int(m["updated_at_ms"]),
        finished_at_ms=int(m["finished_at_ms"] or 0),
        items=items or [],
    )


def get_batch(conn: Connection, batch_id: str, *, items: int = 100) -> BatchView:
    row = conn.execute(select(*_b.c).where(_b.c.id == batch_id)).first()
    if row is None:
        raise BatchNotFound(f"no bulk action with id {batch_id[:80]!r} (wiggle batch list)")
    listed = conn.execute(
        select(_bi.c.instance_id, _bi.c.state, _bi.c.message, _bi.c.at_ms)
        .where(_bi.c.batch_id == batch_id, _bi.c.state.in_([SKIPPED, FAILED]))
        .order_by(_bi.c.seq)
        .limit(items)
    ).all()
    return _view(row, [BatchItemView(r[0], r[1], r[2], int(r[3] or 0)) for r in listed])


def list_batches(conn: Connection, limit: int = 50, action: str = "") -> list[BatchView]:
    q = select(*_b.c)
    if action:
        q = q.where(_b.c.action == action)
    rows = conn.execute(q.order_by(_b.c.created_at_ms.desc(), _b.c.id.desc()).limit(limit))
    return [_view(r) for r in rows]


def set_state(conn: Connection, now_sql: str, batch_id: str, to: str) -> BatchView:
    """Pause, resume or cancel a batch (a finished one is left as it is)."""
    get_batch(conn, batch_id, items=0)  # BatchNotFound
    allowed = {PAUSED: (RUNNING,), RUNNING: (PAUSED,), CANCELLED: (RUNNING, PAUSED)}[to]
    values: dict[str, Any] = {"state": to, "updated_at_ms": _now(conn, now_sql)}
    if to == CANCELLED:
        values["finished_at_ms"] = values["updated_at_ms"]
    conn.execute(update(_b).where(_b.c.id == batch_id, _b.c.state.in_(allowed)).values(values))
    return get_batch(conn, batch_id)


def _now(conn: Connection, now_sql: str) -> int:
    return int(conn.execute(select(literal_column(now_sql))).scalar_one())


# -- working through items (the leader) ---------------------------------------------------------


class _Taken(Exception):
    """Another server's transaction handled the item first."""


#: An action on one instance: (engine, connection, instance id, the batch's params, the item's
#: detail, who asked) -> its message, or (message, undo) when it keeps what it replaced.
Action = Callable[["Engine", Connection, str, dict[str, Json], Json, str], "str | tuple[str, Json]"]


def _cancel(eng: Engine, conn: Connection, iid: str, p: dict[str, Json], d: Json, by: str) -> str:
    if _instances.status_of(conn, iid) is InstanceStatus.CANCELLED:
        raise Skip("already CANCELLED")
    _instances.cancel(eng, conn, iid, str(p.get("reason") or f"bulk action by {by}"))
    return "cancelled"


def _retry(eng: Engine, conn: Connection, iid: str, p: dict[str, Json], d: Json, by: str) -> str:
    result = _repair.retry(eng, conn, iid, by=by)
    return "retried at " + ", ".join(result.nodes)


def _reset(eng: Engine, conn: Connection, iid: str, p: dict[str, Json], d: Json, by: str) -> str:
    _repair.reset(eng, conn, iid, str(p["node"]), by=by)
    return f"reset to {p['node']}"


def _signal(eng: Engine, conn: Connection, iid: str, p: dict[str, Json], d: Json, by: str) -> str:
    delivered = _instances.signal(eng, conn, iid, str(p["name"]), p.get("payload"))
    return "delivered" if delivered else "buffered"


class Skip(WiggleError):
    """The action does not apply to this instance (said in the item's message)."""


class Defer(Exception):
    """Not now: the item stays PENDING and is tried again a little later (its message says
    why: a migration waits for a leased step's report)."""


#: Each action, and any the engine adds (a migration), by name.
ACTION_FUNCTIONS: dict[str, Action] = {
    "cancel": _cancel,
    "retry": _retry,
    "reset": _reset,
    "signal": _signal,
}


class BulkRunner:
    """The leader's share of bulk actions: a few items per batch per tick, at each batch's
    rate (a token bucket per batch, in this process: a new leader starts with an empty one)."""

    def __init__(self, eng: Engine) -> None:
        self._eng = eng
        self._buckets: dict[str, tuple[float, float]] = {}  # batch id -> (tokens, at)
        self._lock = threading.Lock()
        self.busy = False  # a batch had items left after the last tick

    def tick(self) -> int:
        eng = self._eng
        running = eng.db.read(
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
            items = eng.db.read(
                functools.partial(_pending, batch_id=row.id, limit=budget, now_sql=eng.db.now_sql)
            )
            if not items:
                finished = eng.db.write(
                    functools.partial(_finish, now_sql=eng.db.now_sql, batch_id=row.id)
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
        eng = self._eng
        fn = ACTION_FUNCTIONS[action]

        def run(conn: Connection) -> str:
            _claim(conn, eng.db.now_sql, batch_id, seq, DONE, "")
            got = fn(eng, conn, instance_id, params, detail, by)
            message, undo = got if isinstance(got, tuple) else (got, None)
            _count(conn, eng.db.now_sql, batch_id, DONE)
            conn.execute(
                update(_bi)
                .where(_bi.c.batch_id == batch_id, _bi.c.seq == seq)
                .values(message=message[:500], undo=None if undo is None else dumps(undo))
            )
            return message

        try:
            eng.db.write(run)
            return 1
        except (_Taken, Unavailable, FenceLost):
            return 0  # handled elsewhere, or to try again at a later tick: still PENDING
        except Defer as exc:
            eng.db.write(
                functools.partial(
                    _defer, now_sql=eng.db.now_sql, batch_id=batch_id, seq=seq, message=str(exc)
                )
            )
            return 0
        except WiggleError as exc:
            outcome, message = SKIPPED, str(exc)
        except Exception as exc:  # a defect: recorded on the item, the batch goes on
            _log.exception("bulk action %s on instance %s failed", batch_id, instance_id)
            outcome, message = FAILED, f"{type(exc).__name__}: {exc}"

        def mark(conn: Connection) -> None:
            _claim(conn, eng.db.now_sql, batch_id, seq, outcome, message)
            _count(conn, eng.db.now_sql, batch_id, outcome)

        try:
            eng.db.write(mark)
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
