"""A transition's rows, and how SQLite writes them.

`machine.tx.Tx` decides a transition in memory and hands its rows to the database as one
`Rows` record; `Database.write_rows` writes them, whatever the dialect: PostgreSQL in one
statement (`queries.pg_write`, the distributed profile's `keyed.keyed_write`), SQLite in the
few statements below. A token update carries the values its fence requires as `f_<column>`
keys; one that matches no row raises `FenceLost` on every dialect, and the caller rolls back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, bindparam, delete, update
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from . import schema as s

__all__ = ["FenceLost", "Rows", "write_sqlite"]

_Rows = list[dict[str, Any]]


class FenceLost(Exception):
    """A fenced UPDATE matched no row: someone else moved the token first. Roll back."""

    def __init__(self, token_id: str) -> None:
        super().__init__(token_id)
        self.token_id = token_id


@dataclass
class Rows:
    """What one write of a transition puts in the database, in the order it is written."""

    token_inserts: _Rows = field(default_factory=list)
    #: Every column of each token, with `f_<column>` for each value its fence requires.
    token_updates: _Rows = field(default_factory=list)
    events: _Rows = field(default_factory=list)
    instance_updates: _Rows = field(default_factory=list)
    instance_inserts: _Rows = field(default_factory=list)
    search_put: _Rows = field(default_factory=list)
    search_gone: _Rows = field(default_factory=list)

    def as_args(self) -> tuple[_Rows, ...]:
        """The lists in `queries.pg_write`'s parameter order."""
        return (
            self.token_inserts,
            self.token_updates,
            self.events,
            self.instance_updates,
            self.instance_inserts,
            self.search_put,
            self.search_gone,
        )


_UPDATE_COLUMNS = [c.name for c in s.tokens.c if c.name != "id"]
_UPDATE_TOKEN = (
    update(s.tokens)
    .where(s.tokens.c.id == bindparam("_id"))
    .values({name: bindparam(name) for name in _UPDATE_COLUMNS})
)
_FENCED: dict[tuple[str, ...], Any] = {}


def _fenced_update(columns: tuple[str, ...]) -> Any:
    """The token UPDATE that also requires `columns` to hold the values seen (f_<column>)."""
    stmt = _FENCED.get(columns)
    if stmt is None:
        conds = [s.tokens.c[name] == bindparam(f"f_{name}") for name in columns]
        stmt = _FENCED[columns] = _UPDATE_TOKEN.where(*conds)
    return stmt


def write_sqlite(conn: Connection, rows: Rows) -> None:
    """SQLite: new instances, instance changes, new tokens, step inputs and search values,
    token updates (each fenced one alone: its row count is the fence), then events."""
    if rows.instance_inserts:
        conn.execute(s.instances.insert(), rows.instance_inserts)
    for values in rows.instance_updates:
        values = dict(values)
        if not values.pop("set_context"):
            values.pop("context")
        ident = values.pop("id")
        conn.execute(update(s.instances).where(s.instances.c.id == ident).values(values))
    if rows.token_inserts:
        conn.execute(s.tokens.insert(), rows.token_inserts)
    _write_search(conn, rows)
    plain: _Rows = []
    for row in rows.token_updates:
        row = dict(row)
        row["_id"] = row.pop("id")
        fence = tuple(sorted(k[2:] for k in row if k.startswith("f_")))
        if fence:
            if conn.execute(_fenced_update(fence), row).rowcount != 1:
                raise FenceLost(row["_id"])
        else:
            plain.append(row)
    if plain:
        conn.execute(_UPDATE_TOKEN, plain)
    if rows.events:
        conn.execute(s.events.insert(), rows.events)


def _write_search(conn: Connection, rows: Rows) -> None:
    w = s.search_values
    for r in rows.search_gone:
        conn.execute(delete(w).where(w.c.instance_id == r["instance_id"], w.c.name == r["name"]))
    if rows.search_put:
        ins = sqlite_insert(w)
        conn.execute(
            ins.on_conflict_do_update(
                index_elements=["instance_id", "name"],
                set_={c: ins.excluded[c] for c in ("text_value", "num_value")},
            ),
            rows.search_put,
        )
