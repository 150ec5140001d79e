"""Listing: instances (filtered, newest first, paged, counted) and registered definitions."""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from sqlalchemy import Connection, and_, func, or_, select

from wiggle.errors import InvalidRequest
from wiggle.graph import ExecutionMode, Graph
from wiggle.tracecontext import derive

from ..machine.search import search_of
from ..machine.tx import loads
from ..model.types import (
    DefinitionSummary,
    InstanceFilter,
    InstancePage,
    InstanceStatus,
    InstanceView,
    TokenState,
)
from ..store import schema as s
from .filtering import filter_clauses

__all__ = [
    "find_instances",
    "list_definitions",
    "list_instances",
    "page_token",
    "ready_by_queue",
]

_i = s.instances
_d = s.definitions

_LIST_COLUMNS = [c for c in _i.c if c.name != "parent_token_id"]


def page_token(created_at_ms: int, instance_id: str) -> str:
    """Opaque to callers: where the next page starts (after this instance, newest first)."""
    return base64.urlsafe_b64encode(f"{created_at_ms}:{instance_id}".encode()).decode()


def _after(token: str) -> tuple[int, str]:
    try:
        ms, _, iid = base64.urlsafe_b64decode(token.encode()).decode().partition(":")
        return int(ms), iid
    except (ValueError, UnicodeDecodeError):
        raise InvalidRequest(
            f"page token {token[:80]!r} is not one this server issued; start from the first page"
        ) from None


def _where(
    f: InstanceFilter,
    *,
    with_status: bool,
    conn: Connection | None = None,
    graph_of: Callable[[Connection, str], Graph] | None = None,
    now_sql: str = "0",
) -> list[Any]:
    conds: list[Any] = []
    if f.where:
        assert conn is not None and graph_of is not None
        conds.extend(filter_clauses(conn, f.where, graph_of, now_sql, with_status=with_status))
    if f.flow:
        conds.append(_i.c.flow == f.flow)
    if f.version:
        conds.append(_i.c.version == f.version)
    if with_status and f.status is not None:
        conds.append(_i.c.status == f.status.value)
    if f.started_after_ms:
        conds.append(_i.c.created_at_ms >= f.started_after_ms)
    if f.started_before_ms:
        conds.append(_i.c.created_at_ms < f.started_before_ms)
    if f.id_contains:
        conds.append(_i.c.id.contains(f.id_contains, autoescape=True))
    return conds


def _view(m: Any) -> InstanceView:
    return InstanceView(
        instance_id=m["id"],
        flow=m["flow"],
        version=m["version"],
        status=InstanceStatus(m["status"]),
        context=loads(m["context"]),
        reason=m["reason"],
        execution_mode=ExecutionMode(m["mode"]),
        parent_instance_id=m["parent_instance_id"] or "",
        created_at_ms=int(m["created_at_ms"]),
        updated_at_ms=int(m["updated_at_ms"]),
        input=None if m["input"] is None else loads(m["input"]),
        started_by=m["started_by"] or "",
        trace_id=derive(m["root_id"], m["traceparent"] or "").trace_id,
    )


def list_instances(
    conn: Connection,
    flow: str | None,
    status: InstanceStatus | None,
    limit: int,
    after: str | None,
) -> list[InstanceView]:
    """Instances ordered by id, after the id `after` (Engine.list_instances)."""
    q = select(*_i.c)
    if flow:
        q = q.where(_i.c.flow == flow)
    if status is not None:
        q = q.where(_i.c.status == status.value)
    if after:
        q = q.where(_i.c.id > after)
    rows = conn.execute(q.order_by(_i.c.id).limit(max(1, limit))).all()
    return [_view(r._mapping) for r in rows]


def find_instances(
    conn: Connection,
    f: InstanceFilter,
    limit: int,
    token: str,
    counts: bool,
    graph_of: Callable[[Connection, str], Graph],
    now_sql: str,
) -> InstancePage:
    """A page of instances matching `f`, newest first (ties by id, descending)."""
    q = select(*_LIST_COLUMNS).where(
        *_where(f, with_status=True, conn=conn, graph_of=graph_of, now_sql=now_sql)
    )
    if token:
        ms, iid = _after(token)
        q = q.where(or_(_i.c.created_at_ms < ms, and_(_i.c.created_at_ms == ms, _i.c.id < iid)))
    limit = max(1, limit)
    rows = conn.execute(
        q.order_by(_i.c.created_at_ms.desc(), _i.c.id.desc()).limit(limit + 1)
    ).all()
    views = _with_current_steps(conn, [_view(r._mapping) for r in rows[:limit]])
    views = _with_search(conn, _with_updates(conn, views), graph_of)
    next_token = ""
    if len(rows) > limit:
        last = views[-1]
        next_token = page_token(last.created_at_ms, last.instance_id)
    by_status: dict[str, int] = {}
    if counts:
        by_status = {str(st): 0 for st in InstanceStatus}
        grouped = conn.execute(
            select(_i.c.status, func.count())
            .where(*_where(f, with_status=False, conn=conn, graph_of=graph_of, now_sql=now_sql))
            .group_by(_i.c.status)
        )
        for status, n in grouped:
            by_status[status] = int(n)
    return InstancePage(views, next_token, by_status)


#: Tokens that stand for a step in progress or waiting (a fork parent, JOINED, waits for its
#: branches: the branches say where the instance is).
_WHERE_NOW = (
    TokenState.READY.value,
    TokenState.LEASED.value,
    TokenState.WAITING.value,
    TokenState.AWAITING.value,
)
#: At most this many nodes named per instance in a list ("a, b, c +2").
_MOST_NAMED = 3


def _with_current_steps(conn: Connection, views: list[InstanceView]) -> list[InstanceView]:
    """Where each RUNNING instance of a page is now: the nodes of its live tokens, one query
    for the page (the tokens' (instance_id, state) index answers it)."""
    running = [v for v in views if v.status is InstanceStatus.RUNNING]
    if not running:
        return views
    t = s.tokens
    nodes: dict[str, set[str]] = {}
    rows = conn.execute(
        select(t.c.instance_id, t.c.node_id).where(
            t.c.instance_id.in_([v.instance_id for v in running]), t.c.state.in_(_WHERE_NOW)
        )
    )
    for instance_id, node_id in rows:
        nodes.setdefault(instance_id, set()).add(node_id)
    out = []
    for v in views:
        names = sorted(nodes.get(v.instance_id, ()))
        if names:
            shown = ", ".join(names[:_MOST_NAMED])
            if len(names) > _MOST_NAMED:
                shown += f" +{len(names) - _MOST_NAMED}"
            v = replace(v, current_node=shown)
        out.append(v)
    return out


def _with_search(
    conn: Connection, views: list[InstanceView], graph_of: Callable[[Connection, str], Graph]
) -> list[InstanceView]:
    """Each instance's search attribute values (one query for the page)."""
    graphs = {v.instance_id: graph_of(conn, v.version) for v in views}
    wanted = [iid for iid, g in graphs.items() if g.search]
    found = search_of(conn, wanted, graphs)
    return [replace(v, search=found[v.instance_id]) if v.instance_id in found else v for v in views]


def _with_updates(conn: Connection, views: list[InstanceView]) -> list[InstanceView]:
    """Each instance's `updated_at_ms` as its newest event's time (every move logs one; the row
    itself is written only at the start and the end). One query for the page, one index step
    per instance: the newest row of the events' (instance_id, seq) index."""
    if not views:
        return views
    e = s.events
    newest = (
        select(e.c.at_ms)
        .where(e.c.instance_id == _i.c.id)
        .order_by(e.c.seq.desc())
        .limit(1)
        .scalar_subquery()
    )
    rows = conn.execute(select(_i.c.id, newest).where(_i.c.id.in_([v.instance_id for v in views])))
    at = {instance_id: int(ms) for instance_id, ms in rows if ms is not None}
    return [replace(v, updated_at_ms=max(v.updated_at_ms, at.get(v.instance_id, 0))) for v in views]


def list_definitions(
    conn: Connection,
    name: str | None,
    include_counts: bool,
    graph_of: Callable[[Connection, str], Graph],
) -> list[DefinitionSummary]:
    """Registered versions by flow name, the newest version of each name first."""
    q = select(_d.c.name, _d.c.version, _d.c.registered_at_ms)
    if name:
        q = q.where(_d.c.name == name)
    rows = conn.execute(q.order_by(_d.c.name, _d.c.seq.desc())).all()
    counts: dict[str, dict[str, int]] = {}
    if include_counts and rows:
        cq = select(_i.c.version, _i.c.status, func.count()).group_by(_i.c.version, _i.c.status)
        if name:
            cq = cq.where(_i.c.flow == name)
        for version, status, n in conn.execute(cq):
            counts.setdefault(version, {})[status] = int(n)
    out = []
    for r in rows:
        per = counts.get(r.version, {})
        out.append(
            DefinitionSummary(
                name=r.name,
                version=r.version,
                registered_at_ms=int(r.registered_at_ms),
                execution_mode=graph_of(conn, r.version).execution,
                instance_counts=(
                    {str(st): per.get(str(st), 0) for st in InstanceStatus}
                    if include_counts
                    else {}
                ),
            )
        )
    return out


def ready_by_queue(conn: Connection) -> dict[str, int]:
    """How many tokens are READY, per queue (the claim index covers it)."""
    t = s.tokens
    rows = conn.execute(
        select(t.c.queue, func.count())
        .where(t.c.state == TokenState.READY.value)
        .group_by(t.c.queue)
    )
    return {queue or "": int(n) for queue, n in rows}
