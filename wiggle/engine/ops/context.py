"""What an operation needs of the engine, and no more: the database, the graph of a version,
the mode a flow runs in when it names none, and the leader's settings.

Operations (repair, bulk actions, migration, the leader's tick) take this context, never the
`Engine`: the facade builds one and hands it down, so that nothing below the facade can reach
back into the engine's own state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Connection

from wiggle.graph import ExecutionMode, Graph

from ..machine.tx import Tx
from ..model.types import Json
from ..store.db import Database

__all__ = ["OpsContext"]


@dataclass(frozen=True)
class OpsContext:
    db: Database
    #: The parsed graph of a stored version (cached by the facade: versions are immutable).
    graph_of: Callable[[Connection, str], Graph]
    default_mode: ExecutionMode
    #: This engine's name in the leader election.
    node_id: str
    #: How long a won election holds before it must be renewed.
    leader_ttl_s: float
    #: Refuses (InputRejected) an input the version's `input` schema rejects.
    check_input: Callable[[Graph, Json], None]

    def tx(self, conn: Connection) -> Tx:
        """A transaction's identity map over `conn`, its clock read by its first statement."""
        return Tx(conn, self.db, 0, self.graph_of, self.default_mode)
