"""Reminders of human tasks (docs/human-tasks.md, "Reminders"): the leader records each one
that falls due while its task is open, exactly once (two engines racing over one, a failover),
as the event `human_task_reminded` and the task's count; none after the task closed. On SQLite
and PostgreSQL, on a virtual clock.
"""

from __future__ import annotations

import functools
import threading

import pytest
from engine_testkit import events_of
from sqlalchemy import select

from wiggle.compiler import load_flow
from wiggle.engine import Engine, InstanceStatus
from wiggle.engine.ops import tasks as _tasks
from wiggle.engine.ops import ticker as _ticker
from wiggle.engine.reads.tasks import TaskView
from wiggle.engine.store import schema

HOUR = 3_600_000

REMIND = """
wiggle: 1
name: remind
steps:
  - human: approve
    title: Approve
    form: {}
    assignee: alice
    candidates: {people: [bob, carol], groups: [finance]}
    exclude: [starter]
    remind: [2h, 1h]
    timeout: 1d
    into: decision
"""


def _start(engine: Engine, **kw) -> tuple[str, TaskView]:
    engine.register(load_flow(REMIND))
    iid = engine.start("remind", {}, **kw).instance_id
    (task,) = engine.list_tasks("", admin=True, instance_id=iid)
    return iid, task


def _reminded(engine: Engine, iid: str) -> list[dict]:
    view = engine.describe(iid, include_events=True)
    return [e.detail for e in events_of(view, "human_task_reminded")]


def _next_remind(engine: Engine, task_id: str) -> int | None:
    h = schema.human_tasks
    return engine.db.read(
        lambda c: c.execute(select(h.c.next_remind_at_ms).where(h.c.id == task_id)).scalar()
    )


def test_each_reminder_is_recorded_once_at_its_time(clock, engine):
    iid, task = _start(engine, started_by="carol")
    created = task.created_at_ms
    assert (task.reminded_count, task.next_remind_at_ms) == (0, created + HOUR)
    assert engine.next_due_ms() == created + HOUR
    clock.advance(HOUR - 1)
    engine.tick()
    assert _reminded(engine, iid) == []
    clock.advance(1)
    assert engine.tick() == 1
    assert engine.tick() == 0  # recorded: not again
    (first,) = _reminded(engine, iid)
    assert first == {
        "task_id": task.task_id,
        "reminder": 1,
        "reminders": 2,
        "due_at_ms": created + HOUR,
        "people": ["alice", "bob"],  # the starter is excluded: not reminded
        "groups": ["finance"],
    }
    now = engine.show_task(task.task_id, "alice")
    assert (now.reminded_count, now.last_reminded_at_ms) == (1, created + HOUR)
    assert now.next_remind_at_ms == created + 2 * HOUR
    assert engine.next_due_ms() == created + 2 * HOUR
    engine.claim_task(task.task_id, "bob")
    clock.advance(HOUR)
    assert engine.tick() == 1
    second = _reminded(engine, iid)[1]
    assert (second["reminder"], second["people"], second["groups"]) == (2, ["bob"], [])
    done = engine.show_task(task.task_id, "bob")
    assert (done.reminded_count, done.next_remind_at_ms) == (2, None)
    assert engine.next_due_ms() == created + 24 * HOUR  # only the deadline is left
    clock.advance(10 * HOUR)
    engine.tick()
    assert len(_reminded(engine, iid)) == 2


def test_reminders_overdue_after_an_outage_are_each_recorded_once(clock, engine):
    iid, task = _start(engine)
    clock.advance(3 * HOUR)  # no leader ticked meanwhile
    while engine.tick():
        pass
    reminded = _reminded(engine, iid)
    assert [(r["reminder"], r["due_at_ms"] - task.created_at_ms) for r in reminded] == [
        (1, HOUR),
        (2, 2 * HOUR),
    ]


def test_an_answered_task_is_not_reminded(clock, engine):
    iid, task = _start(engine)
    engine.complete_task(task.task_id, "alice", (), {"ok": True})
    assert _next_remind(engine, task.task_id) is None
    assert engine.next_due_ms() is None
    clock.advance(3 * HOUR)
    assert engine.tick() == 0
    assert _reminded(engine, iid) == []
    assert engine.describe(iid).status is InstanceStatus.COMPLETED


def test_a_task_closed_otherwise_is_not_reminded_and_its_reminders_are_dropped(clock, engine):
    iid, task = _start(engine)
    engine.cancel(iid, "withdrawn")
    # A driver of a virtual clock is not sent to a reminder that will not happen; the leader's
    # own wake-up still sees it, and drops it once it is due.
    assert engine.next_due_ms() is None
    clock.advance(HOUR)
    assert engine.tick() == 0
    assert _reminded(engine, iid) == []
    assert _next_remind(engine, task.task_id) == task.created_at_ms + 2 * HOUR
    clock.advance(HOUR)
    engine.tick()
    assert _next_remind(engine, task.task_id) is None
    assert engine.show_task(task.task_id, "alice").reminded_count == 0


def test_after_a_reset_to_the_step_only_the_new_task_is_reminded(clock, engine):
    iid, first = _start(engine)
    clock.advance(30 * 60_000)
    engine.reset(iid, "approve")
    tasks = engine.list_tasks("", admin=True, states=[], instance_id=iid)
    second = next(t for t in tasks if t.task_id != first.task_id)
    assert second.next_remind_at_ms == second.created_at_ms + HOUR
    assert engine.next_due_ms() == second.next_remind_at_ms  # not the closed task's
    clock.advance(HOUR)
    while engine.tick():
        pass
    assert [r["task_id"] for r in _reminded(engine, iid)] == [second.task_id]
    assert _next_remind(engine, first.task_id) == first.created_at_ms + 2 * HOUR


def test_a_reminder_raced_by_two_engines_is_recorded_once(database_url, clock):
    """Bypass the election: both engines run the reminder's transaction at once."""
    a = Engine(database_url, node_id="a", clock=clock)
    b = Engine(database_url, node_id="b", clock=clock)
    try:
        iid, task = _start(a)
        clock.advance(HOUR)
        barrier = threading.Barrier(2)
        results: list[int] = []

        def remind(engine: Engine) -> None:
            barrier.wait()
            fn = functools.partial(
                _tasks.remind, engine.ops, task_id=task.task_id, due=task.next_remind_at_ms
            )
            results.append(_ticker._once(engine.ops, fn))

        threads = [threading.Thread(target=remind, args=(e,)) for e in (a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(results) == [0, 1]
        assert [r["reminder"] for r in _reminded(a, iid)] == [1]
        assert a.show_task(task.task_id, "alice").reminded_count == 1
    finally:
        a.close()
        b.close()


def test_a_failover_records_each_reminder_once(database_url, clock):
    ttl_s = 1.5 * HOUR / 1000
    a = Engine(database_url, node_id="a", leader_ttl_s=ttl_s, clock=clock)
    b = Engine(database_url, node_id="b", leader_ttl_s=ttl_s, clock=clock)
    try:
        a.register(load_flow(REMIND))
        ids = [a.start("remind", {"i": i}).instance_id for i in range(10)]
        a.tick()  # a leads, then stops ticking without stepping down
        clock.advance(HOUR)  # the first reminders fall due while a's term still runs
        assert b.tick() == 0
        assert all(_reminded(b, i) == [] for i in ids)
        clock.advance(HOUR)  # a's term lapsed: b takes over, the second reminders are due too
        while b.tick():
            pass
        assert a.tick() == 0  # a is back, but b leads
        assert [[r["reminder"] for r in _reminded(b, i)] for i in ids] == [[1, 2]] * 10
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("answered", [False, True], ids=["open", "answered"])
def test_an_answer_racing_a_reminder_leaves_no_reminder_after_it(clock, engine, answered):
    """The reminder's transaction takes the instance's lock, as an answer does: a reminder
    recorded after the answer committed finds the task closed."""
    iid, task = _start(engine)
    clock.advance(HOUR)
    if answered:
        engine.complete_task(task.task_id, "bob", (), {"ok": True})
    fn = functools.partial(
        _tasks.remind, engine.ops, task_id=task.task_id, due=task.next_remind_at_ms
    )
    assert _ticker._once(engine.ops, fn) == (0 if answered else 1)
    kinds = [
        e.kind
        for e in engine.describe(iid, include_events=True).events
        if e.kind.startswith("human_task_")
    ]
    expected = ["human_task_created", "human_task_completed"]
    if not answered:
        expected = ["human_task_created", "human_task_reminded"]
    assert kinds == expected
