"""Eager dispatch: leasing a task to a worker inside the transaction that made it READY.

A start with `eager` hands the new instance's first task to the starting worker; a CompleteTask
with `next` hands the instance's next task to the reporting worker. Either saves the worker a
PollTasks round trip and the server a claim transaction (docs/worker-protocol.md, "Eager
dispatch"). The lease a `next` task gets is derived from the reported lease, so a CompleteTask
resent after a lost answer finds that same task again (`reissue`).
"""

from __future__ import annotations

import hashlib

from sqlalchemy import select

from ..model.types import EagerRequest, InstanceStatus, TaskActivation, TokenState
from ..store import schema as s
from .claims import activation
from .tx import TOKEN_COLUMNS, Inst, Tx, new_id

__all__ = ["lease_ready", "next_lease", "reissue"]

_t = s.tokens


def next_lease(lease: str) -> str:
    """The lease id CompleteTask's `next` issues after `lease`: derived, not random, so that a
    resent CompleteTask finds the task it leased the first time."""
    return hashlib.blake2b(lease.encode(), digest_size=16, person=b"wiggle-next").hexdigest()


def lease_ready(
    tx: Tx, inst: Inst, worker: EagerRequest, *, lease: str | None = None
) -> TaskActivation | None:
    """Lease the instance's first READY task on the worker's queues (and activities) to it, in
    this transaction; None when there is none."""
    for tok in tx.tokens.values():
        if (
            tok.instance_id != inst.id
            or tok.state is not TokenState.READY
            or tok.queue not in worker.queues
            or not _has_activity(worker, tok.activity)
        ):
            continue
        tok.state = TokenState.LEASED
        tok.lease = lease or new_id()
        tok.report_seq = 0
        tok.lease_owner = worker.worker_id
        tok.lease_expires_at_ms = tx.now + tok.timeout_ms
        # Leased before anyone could see it READY: no poller needs waking for it.
        tx.wakeups.task_taken()
        tx.save(tok)
        tx.event(
            inst.id,
            "step_started",
            tok.node_id,
            tok.attempt,
            worker=worker.worker_id,
            eager=True,
            **tok.where,
        )
        return activation(
            {**tok.row(), "lease_expires_at_ms": tok.lease_expires_at_ms},
            inst.graph,
            tx.default_mode,
            inst,
        )
    return None


def reissue(tx: Tx, inst: Inst, lease: str) -> TaskActivation | None:
    """The task a CompleteTask with `next` leased after `lease`, if no report used it yet."""
    if inst.status is not InstanceStatus.RUNNING:
        return None
    row = tx.conn.execute(
        select(*TOKEN_COLUMNS).where(
            _t.c.instance_id == inst.id,
            _t.c.lease == next_lease(lease),
            _t.c.state == TokenState.LEASED.value,
            _t.c.report_seq == 0,
        )
    ).first()
    return None if row is None else activation(row._mapping, inst.graph, tx.default_mode, inst)


def _has_activity(worker: EagerRequest, activity: str | None) -> bool:
    """Whether the worker can run a task of `activity` (it said nothing, or it listed it)."""
    return not worker.activities or activity is None or activity in worker.activities
