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

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, func, literal_column, select, update

from wiggle.errors import BatchNotFound, InvalidRequest, WiggleError
from wiggle.filters import Condition, parse_filter

from ..machine.tx import dumps, loads, new_id
from ..model.types import InstanceStatus, Json
from ..reads.filtering import filter_clauses
from ..store import schema as s
from .context import OpsContext
from .repair import reset_target_problem

__all__ = [
    "BatchItemView",
    "BatchView",
    "BulkPreview",
    "Defer",
    "Skip",
    "create_batch",
    "preview",
]

_log = logging.getLogger("wiggle.engine")

_i = s.instances
_b = s.batches
_bi = s.batch_items

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


class Skip(WiggleError):
    """The action does not apply to this instance (said in the item's message)."""


class Defer(Exception):
    """Not now: the item stays PENDING and is tried again a little later (its message says
    why: a migration waits for a leased step's report)."""


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
    action: str = "",
    params: dict[str, Json] | None = None,
) -> BulkPreview:
    """What `where` matches now. With `action`, it and `params` are checked as a start of
    that bulk action checks them: the preview refuses what the run would."""
    clauses = _matching(conn, where, graph_of, now_sql)
    if action:
        args = params or {}
        if action == "reset":
            _check_reset_target(graph_of, conn, clauses, str(args["node"]))
    by_status = {str(st): 0 for st in InstanceStatus}
    for status, n in conn.execute(
        select(_i.c.status, func.count()).where(*clauses).group_by(_i.c.status)
    ):
        by_status[status] = int(n)
    first = conn.execute(
        select(_i.c.id).where(*clauses).order_by(_i.c.created_at_ms, _i.c.id).limit(PREVIEW_IDS)
    ).scalars()
    return BulkPreview(sum(by_status.values()), by_status, list(first))


def _check_reset_target(
    graph_of: Callable[[Connection, str], Any],
    conn: Connection,
    clauses: Sequence[Any],
    node: str,
) -> None:
    """Refuse a bulk reset that no matched instance could take: the node is missing from, the
    end of, or inside a block of every version they run. (Where some versions have it, the
    others' items fail one by one, each saying why.)"""
    versions = conn.execute(
        select(_i.c.flow, _i.c.version).where(*clauses).group_by(_i.c.flow, _i.c.version)
    ).all()
    problems = [
        reset_target_problem(graph_of(conn, version), f"flow {flow!r} ({version[:19]})", node)
        for flow, version in versions
    ]
    if problems and all(problems):
        also = f" (and {len(problems) - 1} more versions alike)" if len(problems) > 1 else ""
        raise InvalidRequest(
            f"no instance the filter matches can be reset to {node[:200]!r}: {problems[0]}{also}"
        )


def create_batch(
    ctx: OpsContext,
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
    if not (rate_per_s > 0) or math.isinf(rate_per_s):
        raise InvalidRequest("a bulk action's rate is a number of instances per second above 0")
    if items is None:
        where = parse_filter(where_texts)
        clauses = _matching(conn, where, ctx.graph_of, ctx.db.now_sql)
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
        if action == "reset":
            _check_reset_target(ctx.graph_of, conn, clauses, str(params["node"]))
        items = [(iid, None) for iid in ids]
    now = int(conn.execute(select(ctx.db.now)).scalar_one())
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
