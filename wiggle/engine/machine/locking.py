"""Reading a reported task with its instance under the root instance's lock.

Every transition of an instance is serialised by a row lock on its root instance (PostgreSQL;
SQLite's writer lock serialises everything). The statements here read the task's token and its
instance and take that lock in one round trip, with the database clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
from sqlalchemy import Connection, bindparam, select

from ..store import schema as s
from ..store.queries import LOCKED_INSTANCE_FIELDS, TOKEN_COLUMN_NAMES, lock_tasks_sql
from .park import inst_from_row
from .tx import TOKEN_COLUMNS, Inst, Tok, Tx

__all__ = ["INSTANCE_FIELDS", "lock_tasks", "lock_token", "read_locked"]

_i = s.instances
ROOT = s.instances.alias("root")
_r = ROOT
# The instance's columns are read from the *locked* alias (see
# wiggle.engine.store.queries.LOCKED_INSTANCE_FIELDS); only what a transition needs: the
# instance's context (its input) can be large.
INSTANCE_FIELDS = LOCKED_INSTANCE_FIELDS
INSTANCE_LABELLED = [_r.c[name].label(f"i_{name}") for name in INSTANCE_FIELDS]


def lock_token(tx: Tx) -> Any:
    """SELECT the token and its instance, locking the root instance's row (PostgreSQL)."""
    t = s.tokens
    return tx.db.cached(
        "lock_token",
        lambda: (
            select(*TOKEN_COLUMNS, *INSTANCE_LABELLED, _i.c.id.label("own_id"), tx.db.now)
            .select_from(t.join(_i, _i.c.id == t.c.instance_id).join(_r, _r.c.id == _i.c.root_id))
            .where(t.c.id == bindparam("tid"))
            .with_for_update(of=_r)
        ),
    )


def read_locked(tx: Tx, conn: Connection, task_id: str) -> tuple[Tok, Inst] | None:
    """Lock by token id; sets `tx.now` from the database clock read in the same statement."""
    row = conn.execute(lock_token(tx), {"tid": task_id}).first()
    if row is None:
        return None
    m = row._mapping
    tx.now = int(m["now_ms"])
    inst_map = {k[2:]: v for k, v in m.items() if k.startswith("i_")}
    if m["own_id"] != inst_map["id"]:
        # The instance row was read before the root's lock was granted; read it again now.
        fresh = conn.execute(select(*_i.c).where(_i.c.id == m["own_id"])).first()
        assert fresh is not None
        inst_map = dict(fresh._mapping)
    inst = inst_from_row(tx, inst_map)
    return tx.adopt(row), inst


def lock_tasks(tx: Tx, task_ids: Sequence[str]) -> dict[str, tuple[Tok, Inst]]:
    """Read `task_ids` with their instances, locking every root instance (PostgreSQL) in one
    statement; sets `tx.now` from the database clock read by that statement."""
    ids = sorted(set(task_ids))
    postgres = tx.db.is_postgres
    param: Any
    if postgres and len(ids) == 1:
        sql = tx.db.cached(
            "lock_task_sql", lambda: lock_tasks_sql(True, tx.db.now_sql, single=True)
        )
        param = {"tid": ids[0]}
    else:
        sql = tx.db.cached("lock_tasks_sql", lambda: lock_tasks_sql(postgres, tx.db.now_sql))
        param = {"tids": ids} if postgres else (orjson.dumps(ids).decode(),)
    rows = tx.db.first_rows(tx.conn, sql, param)  # on PostgreSQL, the BEGIN goes with it
    if not rows:
        tx.now = int(tx.conn.execute(select(tx.db.now)).scalar_one())
        return {}
    found: dict[str, tuple[Tok, Inst]] = {}
    width = len(TOKEN_COLUMN_NAMES)
    fields = LOCKED_INSTANCE_FIELDS
    for row in rows:
        values = tuple(row)
        tx.now = int(values[-1])
        own_id = values[-2]
        inst = tx.instances.get(own_id)
        if inst is None:
            inst_map = dict(zip(fields, values[width : width + len(fields)], strict=True))
            if own_id != inst_map["id"]:
                # A child instance: its row was read before the root's lock was granted (only
                # the locked row is re-read on PostgreSQL); read it again now, under the lock.
                fresh = tx.conn.execute(select(*_i.c).where(_i.c.id == own_id)).first()
                assert fresh is not None
                inst_map = dict(fresh._mapping)
            inst = inst_from_row(tx, inst_map)
        found[values[0]] = (tx.adopt_values(values), inst)
    return found
