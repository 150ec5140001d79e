"""Database profiles: what the engine may ask of its database.

- `DEFAULT`: SQLite, or PostgreSQL as it is: LISTEN/NOTIFY wakes other servers' pollers, an
  advisory lock serialises schema creation, events and signals are numbered by sequences.
- `DISTRIBUTED`: only what PostgreSQL and the distributed SQL engines that speak its protocol
  (YugabyteDB, CockroachDB, Citus) share, at READ COMMITTED or SERIALIZABLE: no LISTEN/NOTIFY
  (other servers' tasks are seen by polling, `_distributed.POLL_S`), no advisory lock, whole
  transactions retried on serialisation failures and deadlocks, a COMMIT whose fate a dropped
  connection hid proved before it is answered, events and signals keyed by instance
  (engine/store/keyed.py), no statement that modifies one table twice. docs/scaling.md maps each
  feature to each engine.

A database keeps the profile it was created under: an engine of the other profile refuses it
(`IncompatibleSchema`).
"""

from __future__ import annotations

from enum import StrEnum

from ..model.clock import Clock
from .db import Database

__all__ = ["DatabaseProfile", "open_database"]


class DatabaseProfile(StrEnum):
    """What the engine may ask of its database (module docstring)."""

    DEFAULT = "default"  #: SQLite, or PostgreSQL with everything it offers
    DISTRIBUTED = "distributed"  #: what distributed SQL engines share with PostgreSQL


def open_database(
    url: str,
    profile: DatabaseProfile | str = DatabaseProfile.DEFAULT,
    *,
    clock: Clock | None = None,
    idle_in_transaction_timeout_s: float = 0.0,
) -> Database:
    """The database layer for `url` under `profile` (InvalidRequest for the distributed
    profile on SQLite), reading `clock` when given (engine/model/clock.py), its PostgreSQL
    sessions ended by the server after `idle_in_transaction_timeout_s` idle inside a transaction
    (0: the server's own setting; store/db.py)."""
    idle = idle_in_transaction_timeout_s
    if DatabaseProfile(profile) is DatabaseProfile.DISTRIBUTED:
        from .distributed import DistributedDatabase

        return DistributedDatabase(url, clock=clock, idle_in_transaction_timeout_s=idle)
    return Database(url, clock=clock, idle_in_transaction_timeout_s=idle)
