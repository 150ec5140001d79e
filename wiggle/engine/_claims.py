"""Handing tasks to workers: the claim (many per statement), the activation, the heartbeat."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import orjson
from sqlalchemy import BigInteger, Connection, bindparam, func, literal_column, select, update

from wiggle.graph import Await, ExecutionMode, Graph, Join, Predicate, Task

from . import _schema as s
from ._db import Database
from ._keyed import CLAIM_EVENTS
from ._tx import loads
from ._types import TaskActivation, TokenState, resolve_mode

__all__ = ["activation", "claim", "heartbeat_stmt"]

_t = s.tokens
_RETURNING = (
    _t.c.id,
    _t.c.lease,
    _t.c.lease_expires_at_ms,
    _t.c.instance_id,
    _t.c.version,
    _t.c.node_id,
    _t.c.queue,
    _t.c.attempt,
    _t.c.context,
    _t.c.input,
    _t.c.loop_counts,
    _t.c.timeout_ms,
)


def claim_stmt(db: Database, by_activity: bool) -> Any:
    """One UPDATE leases up to `limit` READY tokens, oldest first.

    On PostgreSQL the inner SELECT skips rows another claimer holds (SKIP LOCKED), so racing
    pollers never wait on or double-claim a token; every row gets a fresh lease id from the
    database and an expiry from the database clock plus the step's timeout. `by_activity`:
    only tokens whose activity the worker listed (or that predate activities) are taken.
    """
    return db.cached(f"claim:{by_activity}", lambda: _build_claim(db, by_activity))


def _build_claim(db: Database, by_activity: bool) -> Any:
    conds: list[Any] = [
        s.READY_TOKENS,  # literal: the partial ready index's condition
        _t.c.queue.in_(bindparam("queues", expanding=True)),
    ]
    if by_activity:
        conds.append(_t.c.activity.is_(None) | _t.c.activity.in_(bindparam("acts", expanding=True)))
    pick = (
        select(_t.c.id)
        .where(*conds)
        .order_by(_t.c.ready_at_ms)
        .limit(bindparam("lim"))
        .with_for_update(skip_locked=True)
    )
    return (
        update(_t)
        .where(_t.c.id.in_(pick.scalar_subquery()), _t.c.state == TokenState.READY.value)
        .values(
            state=TokenState.LEASED.value,
            lease=literal_column(db.lease_id_sql),
            lease_owner=bindparam("worker"),
            lease_expires_at_ms=literal_column(db.now_sql) + _t.c.timeout_ms,
            report_seq=0,
        )
        .returning(*_RETURNING)
    )


# PostgreSQL: the claim and its step_started events in one round trip. The picked rows are
# locked with SKIP LOCKED, so racing pollers never wait on, or double-claim, a token.
_PG_CLAIM = """
WITH pick AS (
    SELECT id FROM wiggle_tokens
    WHERE state = 'READY' AND queue = ANY(%(queues)s) {by_activity}
    ORDER BY ready_at_ms LIMIT %(lim)s
    FOR UPDATE SKIP LOCKED
), c AS (
    UPDATE wiggle_tokens AS t
    SET state = 'LEASED', lease = {lease}, lease_owner = %(worker)s,
        lease_expires_at_ms = {now} + t.timeout_ms, report_seq = 0
    FROM pick WHERE t.id = pick.id
    RETURNING t.id, t.lease, t.lease_expires_at_ms, t.instance_id, t.version, t.node_id,
              t.queue, t.attempt, t.context, t.input, t.loop_counts, t.timeout_ms
), ev AS (
    {events}
)
SELECT * FROM c
"""
_PG_CLAIM_EVENTS = """INSERT INTO wiggle_events (instance_id, at_ms, kind, node_id, attempt, detail)
    SELECT instance_id, lease_expires_at_ms - timeout_ms, 'step_started', node_id, attempt,
           %(detail)s
    FROM c"""


def pg_claim_sql(db: Database, by_activity: bool) -> str:
    """PostgreSQL's claim statement (parameters queues, lim, worker, detail, and acts when
    `by_activity`)."""
    return _PG_CLAIM.format(
        lease=db.lease_id_sql,
        now=db.now_sql,
        by_activity="AND (activity IS NULL OR activity = ANY(%(acts)s))" if by_activity else "",
        events=CLAIM_EVENTS if db.distributed else _PG_CLAIM_EVENTS,
    )


def claim(
    conn: Connection,
    db: Database,
    queues: Sequence[str],
    worker_id: str,
    limit: int,
    graph_of: Callable[[Connection, str], Graph],
    default_mode: ExecutionMode,
    activities: Sequence[str] = (),
) -> list[TaskActivation]:
    params: dict[str, Any] = {"queues": list(queues), "worker": worker_id, "lim": limit}
    by_activity = bool(activities)
    if by_activity:
        params["acts"] = list(activities)
    detail = '{"worker":' + _json_str(worker_id) + "}"
    if db.is_postgres:
        sql = db.cached(f"pg-claim:{by_activity}", lambda: pg_claim_sql(db, by_activity))
        rows = conn.exec_driver_sql(sql, {**params, "detail": detail}).all()
        if not rows:
            db.wrote_nothing(conn)
    else:
        rows = conn.execute(claim_stmt(db, by_activity), params).all()
    tasks = [activation(r._mapping, graph_of(conn, r.version), default_mode) for r in rows]
    if tasks and not db.is_postgres:
        conn.execute(
            s.events.insert(),
            [
                {
                    "instance_id": a.instance_id,
                    "at_ms": a.lease_expires_at_ms - a.timeout_ms,
                    "kind": "step_started",
                    "node_id": a.node_id,
                    "attempt": a.attempt,
                    "detail": detail,
                }
                for a in tasks
            ],
        )
    tasks.sort(key=lambda a: a.lease_expires_at_ms - a.timeout_ms)
    return tasks


def _json_str(text: str) -> str:
    return orjson.dumps(text).decode()


def activity_of(graph: Graph, node_id: str) -> str:
    node = graph.nodes[node_id]
    if isinstance(node, Await):
        assert node.apply is not None
        return node.apply.activity
    assert isinstance(node, Task | Predicate | Join)
    return node.activity


def activation(m: Any, graph: Graph, default_mode: ExecutionMode) -> TaskActivation:
    raw_input = m["input"] if m["input"] is not None else m["context"]
    return TaskActivation(
        task_id=m["id"],
        lease=m["lease"],
        lease_expires_at_ms=int(m["lease_expires_at_ms"]),
        instance_id=m["instance_id"],
        flow=graph.name,
        version=m["version"],
        node_id=m["node_id"],
        activity=activity_of(graph, m["node_id"]),
        queue=m["queue"],
        attempt=m["attempt"],
        input=loads(raw_input),
        execution_mode=resolve_mode(graph, default_mode),
        loop_counts=loads(m["loop_counts"]),
        timeout_ms=int(m["timeout_ms"]),
    )


def heartbeat_stmt(db: Database) -> Any:
    """Renew a lease: the lease must be checked in the same UPDATE that extends it."""
    return db.cached("heartbeat", lambda: _build_heartbeat(db))


def _build_heartbeat(db: Database) -> Any:
    length = func.coalesce(bindparam("length", type_=BigInteger), _t.c.timeout_ms)
    return (
        update(_t)
        .where(
            _t.c.id == bindparam("tid"),
            _t.c.lease == bindparam("b_lease"),
            _t.c.state == TokenState.LEASED.value,
        )
        .values(lease_expires_at_ms=literal_column(db.now_sql) + length)
        # The clock read once: the expiry minus the length is the "now" it was computed from.
        .returning(_t.c.lease_expires_at_ms, _t.c.lease_expires_at_ms - length)
    )
