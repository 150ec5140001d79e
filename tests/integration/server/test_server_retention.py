"""The retention setting: the leading server prunes old finished instances by itself."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import update

from wiggle.compiler import load_flow
from wiggle.engine import Engine, InstanceStatus
from wiggle.engine.store import schema as s
from wiggle.errors import InstanceNotFound
from wiggle.server._retention import Retention

DAY_MS = 86_400_000


@pytest.fixture
def engine(database_url: str, flows) -> Iterator[Engine]:
    eng = Engine(database_url)
    eng.register(load_flow(flows["gate"]))
    try:
        yield eng
    finally:
        eng.close()


def _old_cancelled_and_running(engine: Engine) -> tuple[str, str]:
    old = engine.start("gate", {}).instance_id
    engine.cancel(old, "test")
    running = engine.start("gate", {}).instance_id
    i = s.instances
    engine.db.write(
        lambda c: c.execute(
            update(i)
            .where(i.c.id.in_([old, running]))
            .values(updated_at_ms=i.c.updated_at_ms - 10 * DAY_MS)
        )
    )
    return old, running


def test_the_leading_server_prunes_what_finished_before_the_retention(engine, start_server):
    old, running = _old_cancelled_and_running(engine)

    server = start_server(engine, retention_ms=DAY_MS, retention_interval_s=0.05)
    retention = server._retention
    assert retention is not None
    with retention.rounds_done:  # a round counts only once this process leads
        assert retention.rounds_done.wait_for(lambda: retention.rounds >= 1, timeout=30)

    with pytest.raises(InstanceNotFound):
        engine.describe(old)
    assert engine.describe(running).status is InstanceStatus.RUNNING


def test_a_server_that_does_not_lead_prunes_nothing(engine):
    old, _ = _old_cancelled_and_running(engine)
    assert not engine.is_leader  # no ticker ran: this engine never took part in an election

    assert Retention(engine, DAY_MS).run_once() == 0

    assert engine.describe(old).status is InstanceStatus.CANCELLED
