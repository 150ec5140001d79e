"""Handing tasks to workers: the claim (many per statement), the activation, the heartbeat."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import orjson
from sqlalchemy import (
    ARRAY,
    BigInteger,
    ColumnElement,
    Connection,
    String,
    Text,
    any_,
    bindparam,
    case,
    cast,
    func,
    insert,
    literal,
    literal_column,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB

from wiggle.graph import Await, ExecutionMode, Graph, Join, Predicate, Task
from wiggle.tracecontext import derive, step_span_id

from ..model.types import TaskActivation, TokenState, resolve_mode
from ..store import schema as s
from ..store.db import Database
from ..store.keyed import CLAIM_EVENT_SEQ
from .tx import loads

__all__ = ["activation", "claim", "claim_rows", "heartbeat_stmt", "task_trace", "with_trace"]

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
    _t.c.branch,
)


def claim_rows(conn: Connection, db: Database, params: dict[str, Any], by_activity: bool) -> Any:
    """Run the claim (see `_build_claim`) with `params` (queues, worker, lim, acts, detail).

    On PostgreSQL the statement runs as the SQL it compiles to, compiled once per database: a
    claim is the pollers' hot path, and the driver then gets the same text every time (psycopg
    prepares it on the server after a few runs)."""
    stmt = db.cached(f"claim:{by_activity}", lambda: _build_claim(db, by_activity))
    if not db.is_postgres:
        return conn.execute(stmt, params)
    sql, fixed = db.cached(f"claim-sql:{by_activity}", lambda: _compiled(db, stmt))
    return conn.exec_driver_sql(sql, {**fixed, **params})


def _compiled(db: Database, stmt: Any) -> tuple[str, dict[str, Any]]:
    """The statement's SQL for this database, and the values of the parameters it fixes."""
    compiled = stmt.compile(dialect=db.sa.dialect)
    return str(compiled), dict(compiled.params)


def _build_claim(db: Database, by_activity: bool) -> Any:
    """One statement leases up to `lim` READY tokens of `queues`, oldest first.

    The inner SELECT skips rows another claimer holds (SKIP LOCKED on PostgreSQL; SQLite
    serialises writers), so racing pollers never wait on or double-claim a token; every row gets
    a fresh lease id from the database and an expiry from the database clock plus the step's
    timeout. `by_activity`: only tokens whose activity the worker listed (or that predate
    activities) are taken. On PostgreSQL the same statement also writes each task's
    step_started event (one round trip); SQLite cannot write in a WITH, so `claim` inserts them.
    """

    def among(column: Any, name: str) -> Any:
        # PostgreSQL: one array parameter, so the text (and its prepared plan) is the same
        # whatever the list's length. SQLite: the list expanded into IN (...).
        if db.is_postgres:
            return column == any_(bindparam(name, type_=ARRAY(String)))
        return column.in_(bindparam(name, expanding=True))

    conds: list[Any] = [
        s.READY_TOKENS,  # literal: the partial ready index's condition
        among(_t.c.queue, "queues"),
    ]
    if by_activity:
        conds.append(_t.c.activity.is_(None) | among(_t.c.activity, "acts"))
    pick = (
        select(_t.c.id)
        .where(*conds)
        .order_by(_t.c.ready_at_ms)
        .limit(bindparam("lim"))
        .with_for_update(skip_locked=True)
    )
    lease = update(_t).values(
        state=TokenState.LEASED.value,
        lease=literal_column(db.lease_id_sql),
        lease_owner=bindparam("worker"),
        lease_expires_at_ms=literal_column(db.now_sql) + _t.c.timeout_ms,
        report_seq=0,
    )
    if not db.is_postgres:
        return lease.where(
            _t.c.id.in_(pick.scalar_subquery()), _t.c.state == TokenState.READY.value
        ).returning(*_RETURNING)
    picked = pick.cte("pick")
    claimed = lease.where(_t.c.id == picked.c.id).returning(*_RETURNING).cte("c")
    # A branch's step names its branch (a fork's name, a for_each item's index), as its end
    # event does: the step history tells apart the items running one node at once.
    detail = bindparam("detail", type_=Text)
    with_branch = cast(
        cast(detail, JSONB).op("||")(func.jsonb_build_object("branch", claimed.c.branch)), Text
    )
    event = _step_started(claimed.c, case((claimed.c.branch.is_(None), detail), else_=with_branch))
    event |= db.keyed(literal_column(CLAIM_EVENT_SEQ))  # keyed events (engine/store/keyed.py)
    started = insert(s.events).from_select(
        list(event),
        select(*(v if isinstance(v, ColumnElement) else literal(v) for v in event.values())),
    )
    return select(claimed).add_cte(started.cte("ev"))


def _step_started(task: Any, detail: Any) -> dict[str, Any]:
    """The step_started event of a claimed task (a claimed row's columns, or an activation):
    at the lease's start, its expiry minus the step's timeout."""
    return {
        "instance_id": task.instance_id,
        "at_ms": task.lease_expires_at_ms - task.timeout_ms,
        "kind": "step_started",
        "node_id": task.node_id,
        "attempt": task.attempt,
        "detail": detail,
    }


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
    detail = '{"worker":' + _json_str(worker_id) + "}"
    params: dict[str, Any] = {"queues": list(queues), "worker": worker_id, "lim": limit}
    by_activity = bool(activities)
    if by_activity:
        params["acts"] = list(activities)
    if db.is_postgres:
        params["detail"] = detail
    rows = claim_rows(conn, db, params, by_activity).all()
    if not rows:
        db.wrote_nothing(conn)  # the distributed profile then writes no outcome marker
    tasks = [activation(r._mapping, graph_of(conn, r.version), default_mode) for r in rows]
    if tasks and not db.is_postgres:
        conn.execute(
            s.events.insert(),
            [
                _step_started(a, _branch_detail(detail, worker_id, r.branch))
                for a, r in zip(tasks, rows, strict=True)
            ],
        )
    tasks.sort(key=lambda a: a.lease_expires_at_ms - a.timeout_ms)
    return tasks


def _branch_detail(detail: str, worker_id: str, branch: str | None) -> str:
    """SQLite's step_started detail: `detail` (the worker), with the token's branch if any."""
    if branch is None:
        return detail
    return orjson.dumps({"worker": worker_id, "branch": branch}).decode()


def _json_str(text: str) -> str:
    return orjson.dumps(text).decode()


def activity_of(graph: Graph, node_id: str) -> str:
    node = graph.nodes[node_id]
    if isinstance(node, Await):
        assert node.apply is not None
        return node.apply.activity
    assert isinstance(node, Task | Predicate | Join)
    return node.activity


def activation(
    m: Any, graph: Graph, default_mode: ExecutionMode, inst: Any = None
) -> TaskActivation:
    """A claimed token's task; `inst` (an engine.store.rows.Inst) adds its trace context."""
    raw_input = m["input"] if m["input"] is not None else m["context"]
    trace = {}
    if inst is not None:
        trace = {
            "root_id": inst.root_id,
            "traceparent": inst.traceparent or "",
            "tracestate": inst.tracestate or "",
        }
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
        **trace,
    )


def with_trace(conn: Connection, tasks: list[TaskActivation]) -> list[TaskActivation]:
    """`tasks` with their instance trees' trace context: one statement for the batch, made only
    by an engine asked for it (a server that traces), so a claim costs nothing more otherwise."""
    if not tasks:
        return tasks
    i = s.instances
    ids = sorted({t.instance_id for t in tasks})
    rows = conn.execute(
        select(i.c.id, i.c.root_id, i.c.traceparent, i.c.tracestate).where(i.c.id.in_(ids))
    ).all()
    found = {r[0]: (r[1], r[2] or "", r[3] or "") for r in rows}
    out = []
    for t in tasks:
        root, parent, state = found.get(t.instance_id, (t.instance_id, "", ""))
        out.append(replace(t, root_id=root, traceparent=parent, tracestate=state))
    return out


def task_trace(conn: Connection, task_id: str) -> tuple[str, str] | None:
    """(trace id, span id) of the step attempt the task's token is at now, or None when there
    is no such token (docs/observability.md). A local run's token is at its leased step."""
    i = s.instances
    row = conn.execute(
        select(
            _t.c.instance_id,
            _t.c.node_id,
            _t.c.attempt,
            _t.c.loop_counts,
            i.c.root_id,
            i.c.traceparent,
        )
        .select_from(_t.join(i, i.c.id == _t.c.instance_id))
        .where(_t.c.id == task_id)
    ).first()
    if row is None:
        return None
    trace = derive(row.root_id, row.traceparent or "")
    counts = loads(row.loop_counts) or {}
    return trace.trace_id, step_span_id(row.instance_id, task_id, row.node_id, row.attempt, counts)


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
        # The queue: a worker credential's grant is checked against it (engine: heartbeat).
        .returning(_t.c.lease_expires_at_ms, _t.c.lease_expires_at_ms - length, _t.c.queue)
    )
