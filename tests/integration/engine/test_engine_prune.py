"""History pruning (Engine.prune): what goes, what stays, batches, dry runs, late reports.

Instances are aged by moving their end time back in the table: a test never waits for a clock.
"""

from __future__ import annotations

import pytest
from engine_testkit import Driver
from sqlalchemy import func, select, update

from wiggle.engine import Engine, InstanceStatus
from wiggle.engine.ops.prune import write_history
from wiggle.engine.reads.overview import run_endings
from wiggle.engine.store import schema as s
from wiggle.errors import InstanceNotFound, StaleLease

DAY_MS = 86_400_000

WORK = "wiggle: 1\nname: work\nsteps:\n  - task: a\n  - task: b\n"
# `other` is awaited later: a signal of that name sent now is buffered (an unknown name is refused).
GATE = "wiggle: 1\nname: gate\nsteps:\n  - await: go\n  - task: a\n  - await: other\n"
CHILD = "wiggle: 1\nname: child\nsteps:\n  - task: a\n"
PARENT = "wiggle: 1\nname: parent\nsteps:\n  - subflow: child\n  - task: b\n"
PARENT_WAITS = "wiggle: 1\nname: parent-waits\nsteps:\n  - subflow: child\n  - await: go\n"


def _age(engine: Engine, *ids: str, days: int = 10) -> None:
    i = s.instances
    engine.db.write(
        lambda c: c.execute(
            update(i).where(i.c.id.in_(ids)).values(updated_at_ms=i.c.updated_at_ms - days * DAY_MS)
        )
    )


def _rows(engine: Engine, table, instance_id: str) -> int:
    column = table.c.id if table is s.instances else table.c.instance_id
    return engine.db.read(
        lambda c: c.execute(
            select(func.count()).select_from(table).where(column == instance_id)
        ).scalar_one()
    )


def _gone(engine: Engine, instance_id: str) -> bool:
    tables = (s.instances, s.tokens, s.events, s.signals)
    return all(_rows(engine, t, instance_id) == 0 for t in tables)


@pytest.fixture
def d(make_driver):
    driver = make_driver({"a": lambda c: {**c, "a": 1}, "b": lambda c: {**c, "b": 1}})
    for flow in (WORK, GATE, CHILD, PARENT, PARENT_WAITS):
        driver.deploy(flow)
    return driver


def _completed(d) -> str:
    iid = d.engine.start("work", {}).instance_id
    assert d.run(iid).status is InstanceStatus.COMPLETED
    return iid


def _children(engine: Engine, parent_id: str) -> list[str]:
    i = s.instances
    return engine.db.read(
        lambda c: list(
            c.execute(select(i.c.id).where(i.c.parent_instance_id == parent_id)).scalars()
        )
    )


def test_old_finished_instances_go_with_their_rows_and_the_rest_stays(d):
    engine = d.engine
    old_done = _completed(d)
    recent_done = _completed(d)
    cancelled = engine.start("gate", {}).instance_id
    engine.signal(cancelled, "other", {"x": 1})  # a buffered signal row goes with it
    engine.cancel(cancelled, "test")
    running = engine.start("gate", {}).instance_id
    engine.signal(running, "other", {"x": 1})
    _age(engine, old_done, cancelled, running)  # an old start time does not make it finished
    assert _rows(engine, s.signals, cancelled) == 1

    result = engine.prune(DAY_MS)

    assert (result.instances, result.dry_run) == (2, False)
    assert result.tokens >= 2 and result.events >= 2 and result.signals == 1
    assert _gone(engine, old_done) and _gone(engine, cancelled)
    assert engine.describe(recent_done).status is InstanceStatus.COMPLETED
    assert engine.describe(running).status is InstanceStatus.RUNNING
    assert _rows(engine, s.signals, running) == 1
    with pytest.raises(InstanceNotFound):
        engine.describe(old_done)


def test_a_finished_tree_goes_whole_and_a_running_parent_keeps_its_finished_child(d):
    engine = d.engine
    done_parent = engine.start("parent", {}).instance_id
    assert d.run(done_parent).status is InstanceStatus.COMPLETED
    [done_child] = _children(engine, done_parent)
    waiting_parent = engine.start("parent-waits", {}).instance_id
    d.run(waiting_parent, until=lambda v: any(t.state.value == "AWAITING" for t in v.tokens))
    [finished_child] = _children(engine, waiting_parent)
    assert engine.describe(finished_child).status is InstanceStatus.COMPLETED
    _age(engine, done_parent, done_child, waiting_parent, finished_child)

    result = engine.prune(DAY_MS)

    assert result.instances == 2
    assert _gone(engine, done_parent) and _gone(engine, done_child)
    assert engine.describe(finished_child).status is InstanceStatus.COMPLETED
    assert engine.describe(waiting_parent).status is InstanceStatus.RUNNING


def test_a_dry_run_counts_and_removes_nothing(d):
    engine = d.engine
    ids = [_completed(d) for _ in range(3)]
    _age(engine, *ids)

    counted = engine.prune(DAY_MS, dry_run=True, batch=2)

    assert (counted.instances, counted.dry_run) == (3, True)
    assert all(engine.describe(i).status is InstanceStatus.COMPLETED for i in ids)
    removed = engine.prune(DAY_MS)
    assert (removed.instances, removed.tokens, removed.events) == (
        counted.instances,
        counted.tokens,
        counted.events,
    )


def test_small_batches_remove_everything_and_between_can_stop_them(d):
    engine = d.engine
    ids = [_completed(d) for _ in range(5)]
    _age(engine, *ids)
    calls = []

    first = engine.prune(DAY_MS, batch=2, between=lambda: calls.append(1) and False)

    assert first.instances == 2 and len(calls) == 1  # stopped after its first batch
    rest = engine.prune(DAY_MS, batch=2, between=lambda: True)
    assert rest.instances == 3
    assert all(_gone(engine, i) for i in ids)


def test_a_late_report_on_a_pruned_instance_is_refused_cleanly(d):
    engine = d.engine
    iid = engine.start("work", {}).instance_id
    [task] = engine.poll(["default"], "w", 1)
    engine.cancel(iid, "test")  # the worker still holds its lease
    _age(engine, iid)
    assert engine.prune(DAY_MS).instances == 1

    with pytest.raises(StaleLease):
        engine.complete(task.task_id, task.lease, {"late": True})
    with pytest.raises(StaleLease):
        engine.heartbeat(task.task_id, task.lease)
    assert _gone(engine, iid)


def test_written_history_is_a_finished_run_and_exactly_what_prune_removes(d):
    """write_history (a benchmark's --history) leaves what a run of the flow leaves: the run's
    check finds each instance COMPLETED with one step_completed event per step, and a prune of
    what ended a day ago removes exactly those instances with their tokens and events."""
    flow = d.deploy(WORK)
    live = _completed(d)
    write_history(d.engine.db, flow.version, 7, {}, {"a": 1, "b": 1})
    ids = d.engine.db.read(
        lambda c: list(
            c.execute(select(s.instances.c.id).where(s.instances.c.id.like("history-%"))).scalars()
        )
    )
    assert len(ids) == 7
    endings, steps = d.engine.db.read(lambda c: run_endings(c, ids))
    assert {(status, context) for _, status, context, _ in endings} == {
        ("COMPLETED", '{"a":1,"b":1}')
    }
    assert steps == {(i, node): 1 for i in ids for node in ("a", "b")}
    assert d.engine.describe(ids[0]).status is InstanceStatus.COMPLETED

    result = d.engine.prune(DAY_MS)
    # Per instance: one token; instance_started, two step_started, two step_completed and
    # instance_completed.
    assert (result.instances, result.tokens, result.events) == (7, 7, 7 * 6)
    assert not _gone(d.engine, live)


def test_batch_must_be_positive(engine):
    with pytest.raises(ValueError, match="batch"):
        engine.prune(DAY_MS, batch=0)


@pytest.mark.postgres
@pytest.mark.timeout(120)
def test_a_root_another_transaction_holds_is_skipped_not_waited_for(postgres_database_url):
    engine = Engine(postgres_database_url)
    try:
        d = Driver(engine, {"a": lambda c: c, "b": lambda c: c})
        d.deploy(WORK)
        held, free = _completed(d), _completed(d)
        _age(engine, held, free)
        i = s.instances
        with engine.db.sa.connect() as other:  # say a late report being refused holds it
            other.execute(select(i.c.id).where(i.c.id == held).with_for_update())

            assert engine.prune(DAY_MS).instances == 1  # would block here without SKIP LOCKED

            other.rollback()
        assert _gone(engine, free)
        assert engine.prune(DAY_MS).instances == 1
        assert _gone(engine, held)
    finally:
        engine.close()
