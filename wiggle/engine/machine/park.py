"""Parking a token READY for a worker, and reading an instance into a transition.

Leaf helpers of the state machine (engine/machine/drive.py): nothing here drives a token on."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from wiggle.graph import ExecutionMode

from ..model.data import MISSING
from ..model.types import InstanceStatus, Json, TokenState
from ..store import schema as s
from .tx import Inst, Tok, Tx

__all__ = ["inst_from_row", "load_instance", "make_ready", "ready_again"]


_INSTANCE_COLUMNS = [c for c in s.instances.c]


def load_instance(tx: Tx, instance_id: str) -> Inst | None:
    if instance_id in tx.instances:
        return tx.instances[instance_id]
    row = tx.conn.execute(select(*_INSTANCE_COLUMNS).where(s.instances.c.id == instance_id)).first()
    return None if row is None else inst_from_row(tx, row._mapping)


def inst_from_row(tx: Tx, m: Any) -> Inst:
    inst = Inst(
        id=m["id"],
        root_id=m["root_id"],
        flow=m["flow"],
        version=m["version"],
        status=InstanceStatus(m["status"]),
        mode=ExecutionMode(m["mode"]),
        graph=tx.graph_of(tx.conn, m["version"]),
        parent_instance_id=m["parent_instance_id"],
        parent_token_id=m["parent_token_id"],
        started_by=m["started_by"],
        traceparent=m["traceparent"],
        tracestate=m["tracestate"],
    )
    tx.instances[inst.id] = inst
    return inst


def make_ready(
    tx: Tx,
    tok: Tok,
    queue: str,
    timeout_ms: int,
    input: Json = MISSING,
    *,
    activity: str | None,
) -> None:
    tok.state = TokenState.READY
    tok.queue = queue
    tok.activity = activity
    tok.timeout_ms = timeout_ms
    tok.ready_at_ms = tx.now
    tok.wake_at_ms = None
    tok.wait_kind = None
    tok.lease = None
    tok.lease_owner = None
    tok.lease_expires_at_ms = None
    tok.has_input = input is not MISSING
    tok.input = input if tok.has_input else None
    tx.save(tok)
    tx.wakeups.task_ready(queue)


def ready_again(tx: Tx, tok: Tok) -> None:
    """The same step READY once more (a retry, a handback): queue, timeout and input kept."""
    queue = tok.queue or "default"
    make_ready(
        tx,
        tok,
        queue,
        tok.timeout_ms,
        tok.input if tok.has_input else MISSING,
        activity=tok.activity,
    )
