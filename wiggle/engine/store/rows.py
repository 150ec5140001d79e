"""The in-memory rows a transition works on: the instance (`Inst`) and its tokens (`Tok`), with
the JSON and id helpers every engine module shares. A token's columns are read by position
(`Tok.from_values`), so the table's column order is pinned below."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from sqlalchemy import Row

from wiggle.graph import ExecutionMode, Graph

from ..model.types import InstanceStatus, Json, TokenState
from . import schema as s

__all__ = ["TOKEN_COLUMNS", "Inst", "Tok", "dumps", "loads", "new_id"]


def dumps(value: Json) -> str:
    return orjson.dumps(value).decode()


def loads(text: str | bytes) -> Json:
    return orjson.loads(text)


def new_id() -> str:
    return uuid.uuid4().hex


@dataclass
class Inst:
    """The instance a transition works on (its root's row is locked for the whole transaction)."""

    id: str
    root_id: str
    flow: str
    version: str
    status: InstanceStatus
    mode: ExecutionMode
    graph: Graph
    parent_instance_id: str | None
    parent_token_id: str | None
    started_by: str | None = None  # the person who started it (a subflow child: its parent's)
    traceparent: str | None = None  # its start's trace context (a subflow child: its parent's)
    tracestate: str | None = None

    def row(self, input: Json, now_ms: int) -> dict[str, Any]:
        """Its new wiggle_instances row (every column), started with `input` at `now_ms`."""
        return {
            "id": self.id,
            "root_id": self.root_id,
            "flow": self.flow,
            "version": self.version,
            "status": self.status.value,
            "context": dumps(input),
            "input": dumps(input),
            "reason": "",
            "mode": self.mode.value,
            "parent_instance_id": self.parent_instance_id,
            "parent_token_id": self.parent_token_id,
            "created_at_ms": now_ms,
            "updated_at_ms": now_ms,
            "started_by": self.started_by,
            "traceparent": self.traceparent,
            "tracestate": self.tracestate,
        }


@dataclass
class Tok:
    """A token row in memory. `fence` holds the conditions its next UPDATE must also meet."""

    id: str
    instance_id: str
    version: str
    node_id: str
    state: TokenState
    context: Json
    attempt: int = 1
    input: Json = None
    has_input: bool = False
    queue: str | None = None
    timeout_ms: int = 0
    ready_at_ms: int | None = None
    lease: str | None = None
    lease_owner: str | None = None
    lease_expires_at_ms: int | None = None
    wake_at_ms: int | None = None
    wait_kind: str | None = None
    parent_token_id: str | None = None
    branch: str | None = None
    seq: int = 0
    pending: int = 0
    loop_counts: dict[str, int] = field(default_factory=dict)
    child_instance_id: str | None = None
    aux: Json = None
    activity: str | None = None
    report_seq: int = 0
    released_lease: str | None = None
    halted: str | None = None  # the state it was live in when its instance ended (see schema)
    fence: dict[str, Any] = field(default_factory=dict)  # column -> value it must still hold

    @property
    def where(self) -> dict[str, str]:
        """The event detail that names this token's branch (a fork's name, a for_each item's
        index): empty on the main line."""
        return {"branch": self.branch} if self.branch is not None else {}

    def row(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "instance_id": self.instance_id,
            "version": self.version,
            "node_id": self.node_id,
            "state": self.state.value,
            "context": dumps(self.context),
            "input": dumps(self.input) if self.has_input else None,
            "attempt": self.attempt,
            "queue": self.queue,
            "timeout_ms": self.timeout_ms,
            "ready_at_ms": self.ready_at_ms,
            "lease": self.lease,
            "lease_owner": self.lease_owner,
            "lease_expires_at_ms": self.lease_expires_at_ms,
            "wake_at_ms": self.wake_at_ms,
            "wait_kind": self.wait_kind,
            "parent_token_id": self.parent_token_id,
            "branch": self.branch,
            "seq": self.seq,
            "pending": self.pending,
            "loop_counts": dumps(self.loop_counts),
            "child_instance_id": self.child_instance_id,
            "aux": None if self.aux is None else dumps(self.aux),
            "activity": self.activity,
            "report_seq": self.report_seq,
            "released_lease": self.released_lease,
            "halted": self.halted,
        }

    @staticmethod
    def from_values(v: Sequence[Any]) -> Tok:
        """From the token's columns in table order (the first len(TOKEN_COLUMNS) of `v`)."""
        return Tok(
            id=v[0],
            instance_id=v[1],
            version=v[2],
            node_id=v[3],
            state=TokenState(v[4]),
            context=loads(v[5]),
            input=None if v[6] is None else loads(v[6]),
            has_input=v[6] is not None,
            attempt=v[7],
            queue=v[8],
            timeout_ms=v[9],
            ready_at_ms=v[10],
            lease=v[11],
            lease_owner=v[12],
            lease_expires_at_ms=v[13],
            wake_at_ms=v[14],
            wait_kind=v[15],
            parent_token_id=v[16],
            branch=v[17],
            seq=v[18],
            pending=v[19],
            loop_counts=loads(v[20]),
            child_instance_id=v[21],
            aux=None if v[22] is None else loads(v[22]),
            activity=v[23],
            report_seq=v[24],
            released_lease=v[25],
            halted=v[26],
        )

    @staticmethod
    def from_row(r: Row[Any] | Any) -> Tok:
        m = r._mapping
        return Tok(
            id=m["id"],
            instance_id=m["instance_id"],
            version=m["version"],
            node_id=m["node_id"],
            state=TokenState(m["state"]),
            context=loads(m["context"]),
            attempt=m["attempt"],
            input=None if m["input"] is None else loads(m["input"]),
            has_input=m["input"] is not None,
            queue=m["queue"],
            timeout_ms=m["timeout_ms"],
            ready_at_ms=m["ready_at_ms"],
            lease=m["lease"],
            lease_owner=m["lease_owner"],
            lease_expires_at_ms=m["lease_expires_at_ms"],
            wake_at_ms=m["wake_at_ms"],
            wait_kind=m["wait_kind"],
            parent_token_id=m["parent_token_id"],
            branch=m["branch"],
            seq=m["seq"],
            pending=m["pending"],
            loop_counts=loads(m["loop_counts"]),
            child_instance_id=m["child_instance_id"],
            aux=None if m["aux"] is None else loads(m["aux"]),
            activity=m["activity"],
            report_seq=m["report_seq"],
            released_lease=m["released_lease"],
            halted=m["halted"],
        )


TOKEN_COLUMNS = [c for c in s.tokens.c]
# Tok.from_values reads the columns by position: the table must keep this order.
assert [c.name for c in TOKEN_COLUMNS] == [
    "id",
    "instance_id",
    "version",
    "node_id",
    "state",
    "context",
    "input",
    "attempt",
    "queue",
    "timeout_ms",
    "ready_at_ms",
    "lease",
    "lease_owner",
    "lease_expires_at_ms",
    "wake_at_ms",
    "wait_kind",
    "parent_token_id",
    "branch",
    "seq",
    "pending",
    "loop_counts",
    "child_instance_id",
    "aux",
    "activity",
    "report_seq",
    "released_lease",
    "halted",
], "the token columns moved: update Tok.from_values"
