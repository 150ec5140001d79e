"""The distributed profile's SQL: keys a distributed engine can spread, statements it accepts.

Keys. The default schema numbers events and signals from a sequence: every insert asks one
counter for the next value and appends to the right edge of one index, which a distributed
engine cannot spread over its nodes. Under the profile both tables are keyed by
`(instance_id, seq)` instead: the instance id (random) spreads the rows, and `seq` only orders one
instance's rows. It is the database clock in milliseconds times `SEQ_SCALE`, plus the row's
position among that instance's rows in the statement, and never less than the instance's newest
`seq` plus one: a transaction that comes after another in an instance's history has seen the
other's rows, so its rows sort after them even when the nodes' clocks disagree. Two transactions
of one instance that run at once (a claim beside a report of another branch) may pick the same
value: the key's unique violation is retried like a serialisation failure (see distributed).
The values stay below 2^53, so JavaScript reads them exactly.

Statements. CockroachDB refuses a statement that modifies one table in two of its CTEs (unless
all are plain INSERTs), so the transition's write (`_queries.pg_ctes`) is split in two where it
would: the updates and deletes first, the inserts second, each table at most once per statement.
It has no `json_to_recordset` either: the rows of each JSON array parameter come through
`json_array_elements` (`json_rows`).

Outcome markers. `wiggle_commits` holds one row per write transaction whose COMMIT may have to
be proved after the connection dropped under it (see distributed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    func,
    literal_column,
    select,
)

from . import schema as s
from .queries import EVENT_COLUMNS, EVENT_TYPES, PARAM_KEYS, pg_ctes, pg_write, with_ctes
from .schema import COMMITS, distributed_metadata

__all__ = [
    "CLAIM_EVENT_SEQ",
    "COMMITS",
    "KEYED_CONSTRAINTS",
    "SEQ_SCALE",
    "distributed_metadata",
    "keyed_write",
    "signal_seq",
]

#: A key's clock part: milliseconds times this leaves room for this many rows of one instance
#: per statement before the next millisecond's keys (and far beyond: the newest-plus-one rule
#: keeps them apart anyway).
SEQ_SCALE = 1024

#: The primary keys whose unique violation means two transactions picked one key at once.
KEYED_CONSTRAINTS = frozenset({"wiggle_events_pkey", "wiggle_signals_pkey"})


def _seq(at_ms: str, instance: str, table: str, order: str) -> str:
    """The key of a row of `table` written at `at_ms` for `instance`, `order` placing it among
    that instance's rows in the statement."""
    top = f"(SELECT max(x.seq) FROM {table} AS x WHERE x.instance_id = {instance})"
    return (
        f"greatest(max({at_ms}) OVER (PARTITION BY {instance}) * {SEQ_SCALE}, "
        f"coalesce({top}, 0) + 1) "
        f"+ row_number() OVER (PARTITION BY {instance} ORDER BY {order}) - 1"
    )


def json_rows(param: str, alias: str, columns: Sequence[str], types: dict[str, str]) -> str:
    """Rows from ONE JSON array parameter, as `_queries._recordset` makes them, through
    `json_array_elements` (CockroachDB has no `json_to_recordset`); `n` numbers them in array
    order."""
    fields = ", ".join(f"CAST(j->>'{c}' AS {types[c]}) AS {c}" for c in columns)
    return (
        f"(SELECT {fields}, n FROM json_array_elements(%({param})s::json) "
        f"WITH ORDINALITY AS a(j, n)) AS {alias}"
    )


#: `pg_write`'s events CTE, keyed: the rows come as one JSON array, in the order logged.
EVENTS_CTE = (
    "ev AS (INSERT INTO wiggle_events "
    "(instance_id, seq, at_ms, kind, node_id, attempt, detail, entered) "
    f"SELECT e.instance_id, {_seq('e.at_ms', 'e.instance_id', 'wiggle_events', 'e.n')}, "
    "e.at_ms, e.kind, e.node_id, e.attempt, e.detail, e.entered "
    f"FROM {json_rows('e', 'e', EVENT_COLUMNS, EVENT_TYPES)})"
)

#: The key of the claim's step_started events (`_claims`): one per claimed token, the claimed
#: rows being CTE `c`.
CLAIM_EVENT_SEQ = _seq(
    "c.lease_expires_at_ms - c.timeout_ms", "c.instance_id", "wiggle_events", "c.id"
)


def signal_seq(instance_id: str, now_sql: str) -> ColumnElement[int]:
    """The key of a signal for `instance_id` received now (its transaction holds the instance's
    root lock, so no other signal of the instance is written meanwhile)."""
    sig = s.signals
    top = select(func.coalesce(func.max(sig.c.seq), 0) + 1).where(sig.c.instance_id == instance_id)
    clock: Any = literal_column(now_sql) * SEQ_SCALE
    return func.greatest(clock, top.scalar_subquery())


# The CTEs that modify a table another CTE of the write may modify too go in different
# statements: updates and deletes first, inserts second. The events join the first statement
# there is.
_UPDATES = ("upd", "inst", "sdel")
_INSERTS = ("newinst", "ins", "sput")
_ANYWHERE = ("ev",)

_STATEMENTS: dict[tuple[bool, ...], list[str]] = {}


def _statements(shape: tuple[bool, ...]) -> list[str]:
    got = _STATEMENTS.get(shape)
    if got is None:
        ctes = pg_ctes(*shape, events_cte=EVENTS_CTE, rows=json_rows)
        groups = [[n for n in _UPDATES if n in ctes], [n for n in _INSERTS if n in ctes]]
        (groups[0] or groups[1]).extend(n for n in _ANYWHERE if n in ctes)
        got = _STATEMENTS[shape] = [
            with_ctes([ctes[n] for n in group], counts_updates="upd" in group)
            for group in groups
            if group
        ]
    return got


def keyed_write(
    conn: Connection,
    inserts: Sequence[dict[str, Any]],
    updates: Sequence[dict[str, Any]],
    events: Sequence[dict[str, Any]],
    instances: Sequence[dict[str, Any]],
    new_instances: Sequence[dict[str, Any]],
    search_put: Sequence[dict[str, Any]],
    search_gone: Sequence[dict[str, Any]],
) -> None:
    """`_queries.pg_write` under the profile: keyed events, each table modified at most once
    per statement. A lost fence fails the statement that updates the tokens, as there."""
    got = pg_write(inserts, updates, events, instances, new_instances, search_put, search_gone)
    if got is None:
        return
    params = got[1]
    shape = tuple(key in params for key in PARAM_KEYS)
    for sql in _statements(shape):
        conn.exec_driver_sql(sql, params)
