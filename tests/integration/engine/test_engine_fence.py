"""The fence of a token's UPDATE, at the level of one transaction: when the row no longer holds
what the transaction read, nothing of the transaction is written. On PostgreSQL the check is in
the statement itself, so that the COMMIT can travel with the write; these tests pin that a lost
fence still stops the commit there."""

from __future__ import annotations

import pytest
from sqlalchemy import Connection, text

from wiggle.compiler import load_flow
from wiggle.engine import Engine, InstanceStatus
from wiggle.engine.machine.locking import lock_tasks
from wiggle.engine.machine.reports import fence_lease
from wiggle.engine.machine.tx import FenceLost, Tx

FLOW = """
wiggle: 1
name: fenced
steps:
  - task: one
  - task: two
"""


def _leased(engine: Engine) -> tuple[str, str, str]:
    engine.register(load_flow(FLOW))
    started = engine.start("fenced", {})
    (task,) = engine.poll(["default"], "w1", 1)
    return started.instance_id, task.task_id, task.lease


def _events(engine: Engine, instance_id: str) -> int:
    return len(engine.describe(instance_id, include_events=True).events)


@pytest.mark.parametrize("commit", [False, True], ids=["then-commit", "commit-with-write"])
def test_a_token_changed_under_the_transaction_loses_its_fence(
    engine: Engine, commit: bool
) -> None:
    instance_id, task_id, lease = _leased(engine)
    before = _events(engine, instance_id)

    def fn(conn: Connection) -> None:
        tx = Tx(conn, engine.db, 0, engine.graph_of, engine.default_mode)
        tok, _inst = lock_tasks(tx, [task_id])[task_id]
        # Another writer moved the token on meanwhile (here in the same transaction: SQLite
        # admits one writer at a time).
        conn.execute(
            text("UPDATE wiggle_tokens SET lease = 'someone-else' WHERE id = :id"), {"id": task_id}
        )
        fence_lease(tok, lease)
        tx.save(tok)
        tx.event(instance_id, "step_completed", tok.node_id)
        tx.finish(commit=commit)

    with pytest.raises(FenceLost):
        engine.db.write(fn)

    # Rolled back whole: the other writer's change (same transaction) and the event are gone,
    # and the lease still completes the step.
    assert _events(engine, instance_id) == before
    assert engine.complete(task_id, lease, {}) is InstanceStatus.RUNNING
    assert _events(engine, instance_id) > before
