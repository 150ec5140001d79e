"""The engine's hand-written SQL, with each statement's SQLite and PostgreSQL forms together.

Statements that SQLAlchemy Core expresses well for both databases stay Core expressions where
they are used; the ones written here are those whose PostgreSQL form does more in one round
trip than Core can say (data-modifying CTEs, arrays through `unnest`, SKIP LOCKED picks) and
those on the hot path, where a prebuilt string saves Core's per-execution work.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import BigInteger, Integer

from . import _schema as s

__all__ = ["FENCE_COLUMNS", "TOKEN_COLUMN_NAMES", "pg_write"]

TOKEN_COLUMN_NAMES: tuple[str, ...] = tuple(c.name for c in s.tokens.c)

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
_EVENT_COLUMNS = ("instance_id", "at_ms", "kind", "node_id", "attempt", "detail")
_EVENT_TYPES = {name: _pg_type(name, s.events) for name in _EVENT_COLUMNS}


def _unnest(prefix: str, columns: Sequence[str], types: dict[str, str]) -> str:
    arrays = ", ".join(f"%({prefix}{c})s::{types[c]}[]" for c in columns)
    return f"unnest({arrays}) AS {prefix}v({', '.join(columns)})"


def _build_pg_write(inserts: bool, updates: bool, events: bool) -> str:
    ctes: list[str] = []
    cols = TOKEN_COLUMN_NAMES
    if inserts:
        ctes.append(
            f"ins AS (INSERT INTO wiggle_tokens ({', '.join(cols)}) "
            f"SELECT * FROM {_unnest('n_', cols, _TOKEN_TYPES)})"
        )
    if updates:
        fence_types = {f"f_{c}": _TOKEN_TYPES[c] for c in FENCE_COLUMNS}
        every = (*cols, *fence_types)
        sets = ", ".join(f"{c} = u_v.{c}" for c in cols if c != "id")
        # A fence column given NULL is not checked; every fence value is non-null when given.
        fences = " AND ".join(f"(u_v.f_{c} IS NULL OR t.{c} = u_v.f_{c})" for c in FENCE_COLUMNS)
        ctes.append(
            f"upd AS (UPDATE wiggle_tokens AS t SET {sets} "
            f"FROM {_unnest('u_', every, {**_TOKEN_TYPES, **fence_types})} "
            f"WHERE t.id = u_v.id AND {fences} RETURNING 1)"
        )
    if events:
        ctes.append(
            f"ev AS (INSERT INTO wiggle_events ({', '.join(_EVENT_COLUMNS)}) "
            f"SELECT * FROM {_unnest('e_', _EVENT_COLUMNS, _EVENT_TYPES)})"
        )
    tail = "SELECT (SELECT count(*) FROM upd)" if updates else "SELECT 0"
    return f"WITH {', '.join(ctes)} {tail}"


_PG_WRITES: dict[tuple[bool, bool, bool], str] = {}


def pg_write(
    inserts: Sequence[dict[str, Any]],
    updates: Sequence[tuple[dict[str, Any], dict[str, Any]]],
    events: Sequence[dict[str, Any]],
) -> tuple[str, dict[str, Any]] | None:
    """PostgreSQL: new tokens, fenced token updates and events in ONE statement.

    `updates` pairs a token row with its fence ({column: value it must still hold}); the
    statement answers how many updates matched, which the caller compares with how many it
    sent (a shortfall means a fence was lost). None when there is nothing to write.
    """
    shape = (bool(inserts), bool(updates), bool(events))
    if not any(shape):
        return None
    sql = _PG_WRITES.get(shape)
    if sql is None:
        sql = _PG_WRITES[shape] = _build_pg_write(*shape)
    params: dict[str, Any] = {}
    if inserts:
        for c in TOKEN_COLUMN_NAMES:
            params[f"n_{c}"] = [row[c] for row in inserts]
    if updates:
        for c in TOKEN_COLUMN_NAMES:
            params[f"u_{c}"] = [row[c] for row, _ in updates]
        for c in FENCE_COLUMNS:
            params[f"u_f_{c}"] = [fence.get(c) for _, fence in updates]
    if events:
        for c in _EVENT_COLUMNS:
            params[f"e_{c}"] = [ev[c] for ev in events]
    return sql, params
