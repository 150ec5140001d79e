"""History pruning: finished instances removed with their rows, batch by batch.

A tree (a top-level instance and its subflow children, all sharing its `root_id`) goes as one
unit, once its root ended before the cutoff and nothing in it is RUNNING: a finished child of a
running parent is never touched, and no instance leaves a dangling parent or child behind.

Each batch is one short transaction over at most `batch` trees, keyset-paged by (end time, root
id) through the index of finished top-level instances by end time (schema 4), so a long prune
never holds locks for long, never re-reads what it skipped, and reads only the entries of the
instances it removes: removing a day of history costs the same however many days are kept.
It is safe beside a running engine: every transition locks its tree's root row, and a batch
locks the roots it is about to delete (SKIP LOCKED on PostgreSQL: a root some transaction holds,
say a late report being refused, waits for a later run), so a finished tree is either read
whole by the transition or found gone, which every transition already answers (no such task or
instance).
Running instances are never locked: the candidates are read by status, and only finished roots
are locked. Nothing here runs on the hot path: pruning is a CLI command or the leader's
retention duty (wiggle.server).

The other way round, `write_history` writes finished instances in bulk, as a finished run of a
linear flow leaves them (a benchmark's long history; the same rows prune removes).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Connection,
    Integer,
    String,
    Text,
    bindparam,
    cast,
    column,
    delete,
    func,
    insert,
    literal,
    select,
    true,
    tuple_,
    values,
)

from wiggle.graph import Graph, Task

from ..model.types import InstanceStatus, Json, TokenState
from ..store import schema as s
from ..store.db import Database
from ..store.queries import id_chunks
from ..store.rows import Inst, Tok, dumps, new_id

__all__ = ["BATCH", "HISTORY_BATCH", "PruneResult", "prune", "prune_batch", "write_history"]

#: Trees per transaction.
BATCH = 500
_FINISHED = [
    InstanceStatus.COMPLETED.value,
    InstanceStatus.FAILED.value,
    InstanceStatus.CANCELLED.value,
]
_i = s.instances
# Rows that belong to an instance, removed before the instance itself.
_OWNED = (s.events, s.signals, s.tokens)
_KEPT_WITH = (s.step_inputs, s.search_values, s.human_task_actions, s.human_tasks)


@dataclass(frozen=True)
class PruneResult:
    """What a prune removed (or, with dry_run, would remove)."""

    instances: int = 0
    tokens: int = 0
    events: int = 0
    signals: int = 0
    cutoff_ms: int = 0  # instances that ended before this time (database clock, ms)
    dry_run: bool = False

    def __add__(self, other: PruneResult) -> PruneResult:
        return PruneResult(
            self.instances + other.instances,
            self.tokens + other.tokens,
            self.events + other.events,
            self.signals + other.signals,
            self.cutoff_ms or other.cutoff_ms,
            self.dry_run or other.dry_run,
        )


#: Where a prune goes on from: the (end time, id) of the last candidate it read.
Cursor = tuple[int, str]


def candidates_stmt(cutoff_ms: int, after: Cursor, limit: int) -> Any:
    """Finished top-level instances that ended before the cutoff, oldest first, after `after`:
    (end time, id) rows."""
    return (
        select(_i.c.updated_at_ms, _i.c.id)
        .where(
            s.ENDED_ROOTS,  # literal: the partial index's condition
            _i.c.updated_at_ms < cutoff_ms,
            tuple_(_i.c.updated_at_ms, _i.c.id) > tuple_(literal(after[0]), literal(after[1])),
        )
        .order_by(_i.c.updated_at_ms, _i.c.id)
        .limit(limit)
    )


def _candidates(conn: Connection, cutoff_ms: int, after: Cursor, limit: int) -> list[Cursor]:
    return [(int(at), i) for at, i in conn.execute(candidates_stmt(cutoff_ms, after, limit))]


def _lock_roots(conn: Connection, db: Database, roots: list[str], cutoff_ms: int) -> list[str]:
    """The roots still finished and before the cutoff, locked; on PostgreSQL a root another
    transaction holds is skipped rather than waited for. (SQLite: the write transaction
    already excludes every other writer.)"""
    if not db.is_postgres:
        return roots
    q = (
        select(_i.c.id)
        .where(_i.c.id.in_(roots), _i.c.status.in_(_FINISHED), _i.c.updated_at_ms < cutoff_ms)
        .with_for_update(skip_locked=True)
    )
    return list(conn.execute(q).scalars())


def _trees(conn: Connection, roots: list[str]) -> dict[str, list[str]]:
    """Every member of each root's tree (the root first), or no entry for a root whose tree
    still has a RUNNING member. Walks down by parent id, one level per query."""
    members: dict[str, list[str]] = {r: [r] for r in roots}
    busy: set[str] = set()
    level = roots
    while level:
        below: list[str] = []
        for chunk in id_chunks(level):
            q = select(_i.c.id, _i.c.root_id, _i.c.status).where(_i.c.parent_instance_id.in_(chunk))
            for row in conn.execute(q):
                if row.root_id not in members:
                    continue  # not a tree of this batch (cannot happen with sound rows)
                members[row.root_id].append(row.id)
                if row.status == InstanceStatus.RUNNING.value:
                    busy.add(row.root_id)
                below.append(row.id)
        level = below
    return {root: ids for root, ids in members.items() if root not in busy}


def _count(conn: Connection, table: Any, ids: list[str]) -> int:
    column = table.c.instance_id if table is not _i else table.c.id
    total = 0
    for chunk in id_chunks(ids):
        total += int(
            conn.execute(
                select(func.count()).select_from(table).where(column.in_(chunk))
            ).scalar_one()
        )
    return total


def _delete(conn: Connection, table: Any, ids: list[str]) -> int:
    column = table.c.instance_id if table is not _i else table.c.id
    total = 0
    for chunk in id_chunks(ids):
        total += int(conn.execute(delete(table).where(column.in_(chunk))).rowcount or 0)
    return total


def prune_batch(
    conn: Connection,
    db: Database,
    cutoff_ms: int,
    after: Cursor,
    limit: int,
    *,
    dry_run: bool = False,
) -> tuple[PruneResult, Cursor | None]:
    """One batch in the caller's transaction: (what went, where to continue, or None when no
    candidate is left)."""
    found = _candidates(conn, cutoff_ms, after, limit)
    candidates = [ident for _, ident in found]
    if not candidates:
        return PruneResult(cutoff_ms=cutoff_ms, dry_run=dry_run), None
    roots = candidates if dry_run else _lock_roots(conn, db, candidates, cutoff_ms)
    trees = _trees(conn, roots)
    ids = [member for tree in trees.values() for member in tree]
    if not ids:
        return PruneResult(cutoff_ms=cutoff_ms, dry_run=dry_run), found[-1]
    act = _count if dry_run else _delete
    events, signals, tokens = (act(conn, table, ids) for table in _OWNED)
    if not dry_run:  # what repair and search keep of an instance goes with it
        for table in _KEPT_WITH:
            _delete(conn, table, ids)
    instances = act(conn, _i, ids)
    result = PruneResult(instances, tokens, events, signals, cutoff_ms, dry_run)
    return result, found[-1]


def prune(
    db: Database,
    older_than_ms: int,
    *,
    batch: int = BATCH,
    dry_run: bool = False,
    between: Callable[[], bool] | None = None,
) -> PruneResult:
    """Remove (dry_run: count) the trees whose root ended more than `older_than_ms` ago by the
    database's clock, `batch` trees per transaction, until none is left. `between` runs after
    each batch that found candidates (a pause, say); when it returns False the prune stops."""
    if batch < 1:
        raise ValueError("batch must be at least 1")
    cutoff = int(db.read(lambda c: c.execute(select(db.now)).scalar_one())) - older_than_ms
    total = PruneResult(cutoff_ms=cutoff, dry_run=dry_run)
    after: Cursor | None = (-1, "")
    while after is not None:
        one = functools.partial(
            prune_batch, db=db, cutoff_ms=cutoff, after=after, limit=batch, dry_run=dry_run
        )
        got, after = db.read(one) if dry_run else db.write(one)
        total += got
        if after is not None and between is not None and not between():
            break
    return total


#: Instances `write_history` writes per transaction (each brings 2 + 2 x steps events).
HISTORY_BATCH = 5000
_DAY_MS = 86_400_000


def write_history(
    db: Database,
    version: str,
    count: int,
    input: Json,
    context: Json,
    *,
    ended_over_ms: int = 0,
) -> None:
    """Write `count` finished instances of the registered linear flow `version`, as a run that
    started with `input` and ended with `context` leaves them: the COMPLETED instance, its one
    DONE token at `end`, its events (instance_started, step_started and step_completed per
    step, instance_completed). Each ended two days before now (the database's clock), so
    `prune` of what finished a day ago removes exactly them; with `ended_over_ms`, their ends
    are spread evenly over that much time up to now instead (a history kept for that long).

    The database makes the rows itself (INSERT ... SELECT over a generated series), a few
    thousand instances per transaction; the rows are those of `Inst.row` and `Tok.row` with
    only the ids and times varied, so a new column reaches them without a change here.
    """
    graph = db.read(lambda c: _graph(c, version))
    steps = _linear_steps(graph)
    statements = _history_statements(db, graph, steps, input, context)
    now = int(db.read(lambda c: c.execute(select(db.now)).scalar_one()))
    if ended_over_ms > 0:
        gap = max(1, ended_over_ms // count)
        t0 = now - ended_over_ms - 1000
    else:
        gap, t0 = 1, now - 2 * _DAY_MS - count - 1000
    for lo in range(1, count + 1, HISTORY_BATCH):
        hi = min(count, lo + HISTORY_BATCH - 1)

        def write(conn: Connection, lo: int = lo, hi: int = hi) -> None:
            for statement in statements:
                conn.execute(statement, {"lo": lo, "hi": hi, "t0": t0, "gap": gap})

        db.write(write)
    if db.is_postgres:  # what autovacuum would do by itself after a while
        tables = (_i, s.tokens, s.events)
        db.write(lambda c: [c.exec_driver_sql(f"ANALYZE {t.name}") for t in tables])


def _graph(conn: Connection, version: str) -> Graph:
    canonical = conn.execute(
        select(s.definitions.c.canonical).where(s.definitions.c.version == version)
    ).scalar()
    if canonical is None:
        raise ValueError(f"no flow version {version!r} is registered")
    return Graph.from_json(orjson.loads(canonical), version)


def _linear_steps(graph: Graph) -> list[Task]:
    steps: list[Task] = []
    node = graph.nodes[graph.start]
    while isinstance(node, Task):
        steps.append(node)
        node = graph.nodes[node.next]
    if node.kind != "end" or not steps:
        raise ValueError(f"flow {graph.name!r} is not a linear flow of tasks")
    return steps


def _history_statements(
    db: Database, graph: Graph, steps: list[Task], input: Json, context: Json
) -> list[Any]:
    """The INSERT ... SELECTs of one batch. The series `g(i)` numbers its instances (:lo..:hi)
    and `s(k, node)` the flow's steps; ids and times vary with them, every other column is the
    template row's value."""
    lo, hi = bindparam("lo", type_=BigInteger), bindparam("hi", type_=BigInteger)
    if db.is_postgres:
        g = select(func.generate_series(lo, hi).label("i")).cte("g")
    else:
        g = select(lo.label("i")).cte("g", recursive=True)
        g = g.union_all(select(g.c.i + 1).where(g.c.i < hi))
    nodes = values(column("k", Integer), column("node", String), name="s")
    k = nodes.data([(n, step.id) for n, step in enumerate(steps, start=1)]).cte("s")
    t0, gap = bindparam("t0", type_=BigInteger), bindparam("gap", type_=BigInteger)
    started = t0 + g.c.i * gap
    ended = started + 1000
    iid = literal(f"history-{new_id()[:8]}-", String) + cast(g.c.i, Text)
    mode, done = graph.execution, InstanceStatus.COMPLETED
    inst = Inst("", "", graph.name, graph.version, done, mode, graph, None, None)
    instance = inst.row(input, 0) | {"context": dumps(context), "id": iid, "root_id": iid}
    instance |= {"created_at_ms": started, "updated_at_ms": ended}
    last = steps[-1]  # the DONE token keeps the last step's queue, activity and timeout
    tok = Tok("", "", graph.version, "end", TokenState.DONE, context, queue=last.queue)
    tok.activity, tok.timeout_ms = last.activity, last.timeout_ms
    token = tok.row() | {"id": iid + "-t", "instance_id": iid, "ready_at_ms": ended}

    def events(
        kind: str, at: Any, node: Any, attempt: int, detail: Json, per_step: bool, seq: Any
    ) -> Any:
        row = {"instance_id": iid, "at_ms": at, "kind": kind, "node_id": node}
        row |= {"attempt": attempt, "detail": dumps(detail)}
        row |= db.keyed(seq)  # keyed events (engine/store/keyed.py): the instance's own order
        return _insert_select(s.events, row, g.join(k, true()) if per_step else g)

    begun = {"version": graph.version, "mode": mode}
    return [
        _insert_select(_i, instance, g),
        _insert_select(s.tokens, token, g),
        events("instance_started", started, "", 0, begun, False, literal(1, BigInteger)),
        events("step_started", started + k.c.k, k.c.node, 1, {}, True, 2 * k.c.k),
        events("step_completed", started + k.c.k, k.c.node, 1, {}, True, 2 * k.c.k + 1),
        events("instance_completed", ended, "", 0, {"reason": ""}, False, 2 * len(steps) + 2),
    ]


def _insert_select(table: Any, row: dict[str, Any], source: Any) -> Any:
    """INSERT INTO `table` one row per row of `source`: `row` maps each column to an SQL
    expression over `source`, or to a constant every row shares."""
    exprs = [
        v if isinstance(v, ColumnElement) else literal(v, table.c[name].type)
        for name, v in row.items()
    ]
    return insert(table).from_select(list(row), select(*exprs).select_from(source))
