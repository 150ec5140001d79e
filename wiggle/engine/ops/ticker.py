"""The leader's duties, each item in its own small transaction (see leader for the SQL)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Connection

from wiggle.graph import Await, Sleep

from ..machine.drive import place
from ..machine.failures import apply_failure
from ..machine.locking import read_locked
from ..machine.park import ready_again
from ..model.types import InstanceStatus, StepFailure, TokenState
from ..store import schema as s
from ..store.transition import FenceLost
from . import firing as _firing
from . import tasks as _tasks
from .bulk_runner import BulkRunner
from .context import OpsContext
from .leader import (
    acquire_stmt,
    due_leases_stmt,
    due_reminders_stmt,
    due_timers_stmt,
    next_due,
    next_wakeup,
    release_stmt,
)
from .schedule_base import CheckInput

__all__ = ["Tick", "next_due", "next_wakeup", "release_stmt", "tick"]


@dataclass(frozen=True)
class Tick:
    """What one tick did: whether this engine leads now, and how many items it handled."""

    leader: bool
    handled: int


_t = s.tokens
_BATCH = 256


def tick(ctx: OpsContext, bulk: BulkRunner, check_input: CheckInput) -> Tick:
    """Election, then (when this engine leads) due timers, expired leases, due reminders of
    human tasks, due schedules and a share of the bulk actions' items. What they made READY
    wakes pollers after each commit, see wiggle.engine.store.wakeups."""
    me = {"me": ctx.node_id}
    ttl_ms = int(ctx.leader_ttl_s * 1000)
    term = ctx.db.write(
        lambda c: c.execute(acquire_stmt(ctx.db), {**me, "ttl_ms": ttl_ms}).scalar(),
        idempotent=True,
    )
    if term is None:
        return Tick(leader=False, handled=0)
    params = {**me, "term": term, "limit": _BATCH}
    work = 0
    timers = ctx.db.read(lambda c: c.execute(due_timers_stmt(ctx.db), params).all())
    for row in timers:
        work += _once(
            ctx,
            functools.partial(_fire, ctx, token_id=row.id, state=row.state, wake=row.wake_at_ms),
        )
    leases = ctx.db.read(lambda c: c.execute(due_leases_stmt(ctx.db), params).all())
    for row in leases:
        work += _once(ctx, functools.partial(_reclaim, ctx, token_id=row.id, lease=row.lease))
    reminders = ctx.db.read(lambda c: c.execute(due_reminders_stmt(ctx.db), params).all())
    for row in reminders:
        work += _once(
            ctx,
            functools.partial(_tasks.remind, ctx, task_id=row.id, due=row.next_remind_at_ms),
        )
    for name in ctx.db.read(lambda c: _firing.due_schedules(ctx, c, _BATCH)):
        work += _once(
            ctx,
            functools.partial(_firing.fire_due, ctx, name=name, check_input=check_input),
        )
    for name in ctx.db.read(lambda c: _firing.buffered_ready(c, _BATCH)):
        work += _once(
            ctx,
            functools.partial(_firing.start_buffered, ctx, name=name, check_input=check_input),
        )
    work += bulk.tick()
    ctx.db.sweep()
    return Tick(leader=True, handled=work)


def _once(ctx: OpsContext, fn: Callable[[Connection], bool]) -> int:
    try:
        # Fenced on the state it saw: run again after it committed, it finds the token moved.
        done = ctx.db.write(fn, idempotent=True)
    except FenceLost:
        return 0  # someone else moved the token first: nothing to do, by design
    return int(done)


def _fire(ctx: OpsContext, conn: Connection, *, token_id: str, state: str, wake: int) -> bool:
    """Fire one timer, exactly once: the UPDATE is conditional on the state and wake_at seen."""
    tx = ctx.tx(conn)
    got = read_locked(tx, conn, token_id)
    if got is None:
        return False
    tok, inst = got
    if (
        inst.status is not InstanceStatus.RUNNING
        or tok.state.value != state
        or tok.wake_at_ms != wake
        or wake > tx.now
    ):
        return False
    tok.fence = {"state": state, "wake_at_ms": wake}
    node = inst.graph.nodes[tok.node_id]
    kind = "await_timeout" if tok.state is TokenState.AWAITING else (tok.wait_kind or "")
    tx.event(inst.id, "timer_fired", tok.node_id, tok.attempt, timer=kind)
    tok.wake_at_ms = None
    if isinstance(node, Await) and tok.state is TokenState.AWAITING:
        assert node.on_timeout is not None
        tok.node_id = node.on_timeout
        place(tx, inst, tok)
    elif tok.wait_kind == "retry":
        ready_again(tx, tok)
    else:
        assert isinstance(node, Sleep)
        tok.wait_kind = None
        tok.node_id = node.next
        place(tx, inst, tok)
    tx.finish()
    return True


def _reclaim(ctx: OpsContext, conn: Connection, *, token_id: str, lease: str) -> bool:
    """An expired lease is a failed, retryable attempt (docs/graph.md)."""
    tx = ctx.tx(conn)
    got = read_locked(tx, conn, token_id)
    if got is None:
        return False
    tok, inst = got
    expires = tok.lease_expires_at_ms
    if (
        inst.status is not InstanceStatus.RUNNING
        or tok.state is not TokenState.LEASED
        or tok.lease != lease
        or expires is None
        or expires >= tx.now
    ):
        return False
    # A heartbeat does not take the instance lock: the expiry we saw must still be the row's.
    tok.fence = {"lease": lease, "state": TokenState.LEASED.value, "lease_expires_at_ms": expires}
    tx.event(inst.id, "lease_expired", tok.node_id, tok.attempt, worker=tok.lease_owner or "")
    failure = StepFailure(
        f"lease expired: no report within {tok.timeout_ms} ms", error_type="LeaseExpired"
    )
    apply_failure(tx, inst, tok, failure)
    tx.finish()
    return True
