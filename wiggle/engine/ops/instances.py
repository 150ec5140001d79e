"""Instance-level operations: signal, cancel, and an instance's status."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, select

from wiggle.errors import (
    InstanceNotFound,
    InstanceNotRunning,
    InvalidRequest,
    SignalNotAwaited,
)
from wiggle.graph import HUMAN_SIGNAL_PREFIX, Await, Graph

from ..machine.drive import deliver, finish_instance, place
from ..machine.locking import INSTANCE_FIELDS
from ..machine.park import inst_from_row
from ..machine.tx import TOKEN_COLUMNS, Inst, Tok, Tx, dumps
from ..model.types import InstanceStatus, Json, TokenState
from ..reads import describe as _describe
from ..store import schema as s
from ..store.keyed import signal_seq
from .context import OpsContext

__all__ = [
    "awaited_signals",
    "cancel",
    "deliver_signal",
    "lock_instance",
    "signal",
    "status_of",
]

_i = s.instances
_r = s.instances.alias("root")
_t = s.tokens


def lock_instance(ctx: OpsContext, conn: Connection, instance_id: str) -> tuple[Tx, Inst]:
    """Lock the instance's root row (PostgreSQL) and read the database clock with it."""
    tx = ctx.tx(conn)
    # Columns come from the locked root row (see wiggle.engine.machine.locking.lock_token for
    # why); a child instance is read again once the root's lock is held.
    row = conn.execute(
        select(*[_r.c[name] for name in INSTANCE_FIELDS], ctx.db.now)
        .select_from(_i.join(_r, _r.c.id == _i.c.root_id))
        .where(_i.c.id == instance_id)
        .with_for_update(of=_r)
    ).first()
    if row is None:
        raise InstanceNotFound(instance_id)
    tx.now = int(row.now_ms)
    m: Any = row._mapping
    if m["id"] != instance_id:
        m = conn.execute(select(*_i.c).where(_i.c.id == instance_id)).one()._mapping
    return tx, inst_from_row(tx, m)


def awaited_signals(graph: Graph) -> list[str]:
    """The signal names the graph's awaits take, sorted."""
    return sorted({node.signal for node in graph if isinstance(node, Await)})


def signal(ctx: OpsContext, conn: Connection, instance_id: str, name: str, payload: Json) -> bool:
    if name.startswith(HUMAN_SIGNAL_PREFIX):
        # A human step's answer is checked (who answers, the form, how many approvals): it
        # goes through the task, never as a bare signal (docs/human-tasks.md).
        raise InvalidRequest(
            f"signal {name[:80]!r} is the answer of the human task "
            f"{name[len(HUMAN_SIGNAL_PREFIX) :][:80]!r}: complete the task instead "
            "(`wiggle task complete TASK ANSWER`, or CompleteHumanTask, as a person who may "
            "answer it), not by a signal"
        )
    tx, inst = lock_instance(ctx, conn, instance_id)
    if inst.status is not InstanceStatus.RUNNING:
        raise InstanceNotRunning(instance_id, inst.status.value)
    awaited = awaited_signals(inst.graph)
    if name not in awaited:
        # Buffered, it would wait forever (and its instance would wait out its deadline).
        raise SignalNotAwaited(instance_id, name, awaited)
    rows = conn.execute(
        select(*TOKEN_COLUMNS)
        .where(_t.c.instance_id == inst.id, _t.c.state == TokenState.AWAITING.value)
        .order_by(_t.c.seq, _t.c.id)
    ).all()
    target = None
    for row in rows:
        node = inst.graph.nodes[row._mapping["node_id"]]
        if isinstance(node, Await) and node.signal == name:
            target = (tx.adopt(row), node)
            break
    delivered = deliver_signal(ctx, tx, inst, name, payload, target)
    tx.finish()
    return delivered


def deliver_signal(
    ctx: OpsContext,
    tx: Tx,
    inst: Inst,
    name: str,
    payload: Json,
    target: tuple[Tok, Await] | None,
) -> bool:
    """Record the signal `name` and hand it to `target` (a token AWAITING at that await), or
    buffer it (None); the caller holds the instance's lock and finishes `tx`."""
    consumed = None if target is None else tx.now
    keyed = ctx.db.keyed(signal_seq(inst.id, ctx.db.now_sql))
    seq = tx.conn.execute(
        s.signals.insert()
        .values(
            **keyed,
            instance_id=inst.id,
            name=name,
            payload=dumps(payload),
            received_at_ms=tx.now,
            consumed_at_ms=consumed,
            token_id=None if target is None else target[0].id,
        )
        .returning(s.signals.c.seq)
    ).scalar_one()
    tx.event(inst.id, "signal_received", "", 0, signal=name, seq=seq, buffered=target is None)
    if target is not None:
        tok, node = target
        tx.event(inst.id, "signal_consumed", tok.node_id, 0, signal=name, seq=seq)
        if not deliver(tx, inst, tok, node, payload):
            place(tx, inst, tok)
    return target is not None


def cancel(ctx: OpsContext, conn: Connection, instance_id: str, reason: str) -> InstanceStatus:
    tx, inst = lock_instance(ctx, conn, instance_id)
    if inst.status is InstanceStatus.CANCELLED:
        return inst.status  # idempotent: a retried cancel is not an error
    if inst.status is not InstanceStatus.RUNNING:
        raise InstanceNotRunning(instance_id, inst.status.value)
    # The instance keeps the context it had reached (that of the token that moved last, as
    # `describe` shows it), so whoever undoes its side effects can see how far it got.
    reached = _describe.describe(conn, inst.id, False, ctx.graph_of, ctx.db.now).context
    finish_instance(
        tx,
        inst,
        InstanceStatus.CANCELLED,
        f"cancelled: {reason}" if reason else "cancelled",
        reached,
    )
    tx.finish()
    return InstanceStatus.CANCELLED


def status_of(conn: Connection, instance_id: str) -> InstanceStatus | None:
    row = conn.execute(select(_i.c.status).where(_i.c.id == instance_id)).scalar()
    return None if row is None else InstanceStatus(row)


def ended_among(conn: Connection, instance_ids: Sequence[str]) -> list[str]:
    """Which of these instances are no longer RUNNING (one query per 500 ids)."""
    ended: list[str] = []
    for at in range(0, len(instance_ids), 500):
        chunk = list(instance_ids[at : at + 500])
        q = select(_i.c.id).where(_i.c.id.in_(chunk), _i.c.status != InstanceStatus.RUNNING.value)
        ended.extend(conn.execute(q).scalars())
    return ended
