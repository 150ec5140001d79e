"""The engine's hand-written SQL, with each statement's SQLite and PostgreSQL forms together.

Statements that SQLAlchemy Core expresses well for both databases stay Core expressions where
they are used; the ones written here are those whose PostgreSQL form does more in one round
trip than Core can say (data-modifying CTEs, arrays through `unnest`, SKIP LOCKED picks) and
those on the hot path, where a prebuilt string saves Core's per-execution work.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import orjson
from sqlalchemy import BigInteger, Integer

from . import schema as s

__all__ = [
    "FENCE_COLUMNS",
    "IN_LIST_SIZE",
    "PARAM_KEYS",
    "TOKEN_COLUMN_NAMES",
    "id_chunks",
    "lock_tasks_sql",
    "pg_ctes",
    "pg_write",
    "with_ctes",
]

TOKEN_COLUMN_NAMES: tuple[str, ...] = tuple(c.name for c in s.tokens.c)

#: The most ids one `IN (...)` list holds: a statement's parameters stay well under SQLite's
#: and PostgreSQL's limits however many rows a caller asks about.
IN_LIST_SIZE = 500


def id_chunks(ids: Sequence[str]) -> Iterator[list[str]]:
    """`ids` in lists of at most IN_LIST_SIZE, in order."""
    for start in range(0, len(ids), IN_LIST_SIZE):
        yield list(ids[start : start + IN_LIST_SIZE])


#: Columns a token's fence may require to still hold (docs/internals.md, "Fencing").
FENCE_COLUMNS: tuple[str, ...] = ("lease", "state", "node_id", "wake_at_ms", "lease_expires_at_ms")


def _pg_type(name: str, table: Any = s.tokens) -> str:
    col = table.c[name]
    if isinstance(col.type, BigInteger):
        return "bigint"
    if isinstance(col.type, Integer):
        return "int"
    return "text"


_TOKEN_TYPES = {name: _pg_type(name) for name in TOKEN_COLUMN_NAMES}
#: The events a write inserts, column by column, and their PostgreSQL types (the distributed
#: profile's keyed insert, engine/store/keyed.py, reads the same rows).
EVENT_COLUMNS = ("instance_id", "at_ms", "kind", "node_id", "attempt", "detail", "entered")
EVENT_TYPES = {name: _pg_type(name, s.events) for name in EVENT_COLUMNS}


def _recordset(param: str, alias: str, columns: Sequence[str], types: dict[str, str]) -> str:
    """Rows passed as ONE JSON array parameter: orjson encodes it in C, PostgreSQL parses it in
    one go (per-element array adaptation in the driver costs more than the statement)."""
    defs = ", ".join(f"{c} {types[c]}" for c in columns)
    return f"json_to_recordset(%({param})s::json) AS {alias}({defs})"


_INSTANCE_SETS = ("id", "status", "reason", "updated_at_ms", "context", "set_context")
_INSTANCE_TYPES = {
    "id": "text",
    "status": "text",
    "reason": "text",
    "updated_at_ms": "bigint",
    "context": "text",
    "set_context": "boolean",
}


_INSTANCE_COLUMNS = tuple(c.name for c in s.instances.c)
_NEW_INSTANCE_TYPES = {name: _pg_type(name, s.instances) for name in _INSTANCE_COLUMNS}


_SEARCH_COLUMNS = ("instance_id", "name", "text_value", "num_value")
_SEARCH_TYPES = {
    "instance_id": "text",
    "name": "text",
    "text_value": "text",
    "num_value": "double precision",
}
_SEARCH_KEY = _SEARCH_COLUMNS[:2]


#: In the error PostgreSQL raises when a write's fenced updates did not all match.
FENCE_LOST_MARK = "wiggle-fence-lost"


def pg_ctes(
    inserts: bool,
    updates: bool,
    events: bool,
    instances: bool,
    new_instances: bool,
    search_put: bool = False,
    search_gone: bool = False,
    *,
    events_cte: str | None = None,
    rows: Callable[[str, str, Sequence[str], dict[str, str]], str] | None = None,
) -> dict[str, str]:
    """The data-modifying CTEs of a write of this shape, by name, in statement order.
    `events_cte` replaces the events INSERT (the distributed profile keys its events), `rows`
    how a JSON array parameter becomes rows (default: `json_to_recordset`)."""
    rows = rows or _recordset
    ctes: dict[str, str] = {}
    cols = TOKEN_COLUMN_NAMES
    if new_instances:
        icols = _INSTANCE_COLUMNS
        ctes["newinst"] = (
            f"newinst AS (INSERT INTO wiggle_instances ({', '.join(icols)}) "
            f"SELECT {', '.join(icols)} FROM {rows('ni', 'ni', icols, _NEW_INSTANCE_TYPES)})"
        )
    if inserts:
        ctes["ins"] = (
            f"ins AS (INSERT INTO wiggle_tokens ({', '.join(cols)}) "
            f"SELECT {', '.join(cols)} FROM {rows('n', 'n', cols, _TOKEN_TYPES)})"
        )
    if updates:
        fence_types = {f"f_{c}": _TOKEN_TYPES[c] for c in FENCE_COLUMNS}
        every = (*cols, *fence_types)
        sets = ", ".join(f"{c} = u.{c}" for c in cols if c != "id")
        # A fence column given NULL is not checked; every fence value is non-null when given.
        fences = " AND ".join(f"(u.f_{c} IS NULL OR t.{c} = u.f_{c})" for c in FENCE_COLUMNS)
        ctes["upd"] = (
            f"upd AS (UPDATE wiggle_tokens AS t SET {sets} "
            f"FROM {rows('u', 'u', every, {**_TOKEN_TYPES, **fence_types})} "
            f"WHERE t.id = u.id AND {fences} RETURNING 1)"
        )
    if instances:
        ctes["inst"] = (
            "inst AS (UPDATE wiggle_instances AS i SET status = v.status, reason = v.reason, "
            "updated_at_ms = v.updated_at_ms, "
            "context = CASE WHEN v.set_context THEN v.context ELSE i.context END "
            f"FROM {rows('i', 'v', _INSTANCE_SETS, _INSTANCE_TYPES)} WHERE i.id = v.id)"
        )
    if events:
        ctes["ev"] = events_cte or (
            f"ev AS (INSERT INTO wiggle_events ({', '.join(EVENT_COLUMNS)}) "
            f"SELECT {', '.join(EVENT_COLUMNS)} "
            f"FROM {rows('e', 'e', EVENT_COLUMNS, EVENT_TYPES)})"
        )
    # Values that became absent and values that are set go in separate parameters, so that a
    # step that only sets a value (the common case) runs no DELETE at all.
    if search_gone:
        ctes["sdel"] = (
            "sdel AS (DELETE FROM wiggle_search AS w USING "
            f"{rows('sd', 'sd', _SEARCH_KEY, _SEARCH_TYPES)} "
            "WHERE w.instance_id = sd.instance_id AND w.name = sd.name)"
        )
    if search_put:
        ctes["sput"] = (
            "sput AS (INSERT INTO wiggle_search (instance_id, name, text_value, num_value) "
            "SELECT instance_id, name, text_value, num_value "
            f"FROM {rows('sv', 'sv', _SEARCH_COLUMNS, _SEARCH_TYPES)} "
            "ON CONFLICT (instance_id, name) DO UPDATE SET text_value = EXCLUDED.text_value, "
            "num_value = EXCLUDED.num_value)"
        )
    return ctes


def with_ctes(ctes: Sequence[str], *, counts_updates: bool) -> str:
    """One statement of `ctes`. With `counts_updates` (an `upd` CTE among them), the statement
    fails when fewer fenced updates matched than were sent (parameter `nu`).

    A lost fence fails the statement itself rather than returning a count for the caller to
    check, so that the COMMIT can be sent with it: casting the marked text to int raises and
    the transaction aborts. (The text depends on the count, so no constant folding raises it.)
    """
    tail = (
        f"SELECT CAST(CASE WHEN c.n = %(nu)s THEN '0' ELSE '{FENCE_LOST_MARK} ' || c.n END AS int) "
        "FROM (SELECT count(*) AS n FROM upd) AS c"
        if counts_updates
        else "SELECT 0"
    )
    return f"WITH {', '.join(ctes)} {tail}"


def _build_pg_write(*shape: bool) -> str:
    return with_ctes(list(pg_ctes(*shape).values()), counts_updates=shape[1])


_PG_WRITES: dict[tuple[bool, ...], str] = {}

#: `pg_write`'s parameter names, in the order of `pg_ctes`' shape flags.
PARAM_KEYS = ("n", "u", "e", "i", "ni", "sv", "sd")


def pg_write(
    inserts: Sequence[dict[str, Any]],
    updates: Sequence[dict[str, Any]],
    events: Sequence[dict[str, Any]],
    instances: Sequence[dict[str, Any]] = (),
    new_instances: Sequence[dict[str, Any]] = (),
    search_put: Sequence[dict[str, Any]] = (),
    search_gone: Sequence[dict[str, Any]] = (),
) -> tuple[str, dict[str, Any]] | None:
    """PostgreSQL: new instances and tokens, fenced token updates, instance ends and events,
    in ONE statement.

    An update row carries its fence as f_<column> keys (the values the row must still hold;
    absent: not checked). When fewer updates match than were sent (a fence was lost), the
    statement fails with an error naming FENCE_LOST_MARK. Instance rows carry
    status, reason, updated_at_ms and, when set_context, the context. A search value set is
    instance_id, name, text_value, num_value; one now absent is instance_id, name.
    None: nothing to write.
    """
    shape = (
        bool(inserts),
        bool(updates),
        bool(events),
        bool(instances),
        bool(new_instances),
        bool(search_put),
        bool(search_gone),
    )
    if not any(shape):
        return None
    sql = _PG_WRITES.get(shape)
    if sql is None:
        sql = _PG_WRITES[shape] = _build_pg_write(*shape)
    params: dict[str, Any] = {}
    rows_by_key = (
        inserts,
        updates,
        events,
        instances,
        new_instances,
        search_put,
        search_gone,
    )
    for key, rows in zip(PARAM_KEYS, rows_by_key, strict=True):
        if rows:
            params[key] = orjson.dumps(rows).decode()
    if updates:
        params["nu"] = len(updates)
    return sql, params


#: The instance columns a transition needs, read from the locked root alias (PostgreSQL re-reads
#: only the locked row after waiting for its lock; the other joined rows keep the values of the
#: statement's snapshot, which may predate the transaction that held the lock).
LOCKED_INSTANCE_FIELDS = (
    "id",
    "root_id",
    "flow",
    "version",
    "status",
    "mode",
    "parent_instance_id",
    "parent_token_id",
    "started_by",
    "traceparent",
    "tracestate",
)


def lock_tasks_sql(postgres: bool, now_sql: str, *, single: bool = False) -> str:
    """Tokens by id (every token column, then the instance fields of their root instance, the
    token's own instance id and the database clock), locking each root instance row once, in
    root id order so two batches never wait on each other in a cycle.

    PostgreSQL takes the ids as one text[] parameter `tids`, or `single`, one id as `tid` (a
    lone report's: a text binds for less client CPU than an array); SQLite as one JSON array
    (its write lock already serialises writers, so it locks nothing)."""
    token_cols = ", ".join(f"t.{c}" for c in TOKEN_COLUMN_NAMES)
    root_cols = ", ".join(f"root.{c}" for c in LOCKED_INSTANCE_FIELDS)
    if postgres:
        ids = "t.id = %(tid)s" if single else "t.id = ANY(%(tids)s)"
    else:
        ids = "t.id IN (SELECT value FROM json_each(?))"
    lock = " FOR UPDATE OF root" if postgres else ""
    return (
        f"SELECT {token_cols}, {root_cols}, i.id, {now_sql} "
        "FROM wiggle_tokens AS t JOIN wiggle_instances AS i ON i.id = t.instance_id "
        "JOIN wiggle_instances AS root ON root.id = i.root_id "
        f"WHERE {ids} ORDER BY root.id{lock}"
    )
