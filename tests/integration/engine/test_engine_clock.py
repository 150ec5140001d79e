"""An engine given a clock reads it wherever it reads the time: timers, leases, the leader."""

from __future__ import annotations

import threading

import pytest
from engine_testkit import events_of
from sqlalchemy import update

from wiggle.compiler import load_flow
from wiggle.engine import Engine, IncompatibleSchema, InstanceStatus, TokenState, VirtualClock
from wiggle.engine.store import schema as schema

NAP = load_flow("wiggle: 1\nname: nap\nsteps:\n  - sleep: 1h\n  - await: never\n")
SLOW = load_flow(
    "wiggle: 1\nname: slow\nsteps:\n  - task: slow\n    timeout: 30s\n"
    "    retry: {max_attempts: 2, backoff: fixed, initial: 5m}\n"
)


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
def timed(database_url: str, clock: VirtualClock):
    eng = Engine(database_url, clock=clock, leader_ttl_s=5.0)
    try:
        yield eng
    finally:
        eng.close()


def test_events_carry_the_given_time(timed: Engine, clock: VirtualClock) -> None:
    timed.register(NAP)
    clock.advance(1234)
    r = timed.start("nap", {})
    (started,) = events_of(timed.describe(r.instance_id, include_events=True), "instance_started")
    assert started.at_ms == clock.now_ms()


def test_a_sleep_fires_when_the_clock_reaches_it_and_not_before(timed: Engine, clock) -> None:
    timed.register(NAP)
    r = timed.start("nap", {})
    assert timed.tick() == 0
    assert timed.next_due_ms() == clock.now_ms() + 3_600_000
    clock.advance(3_600_000 - 1)
    assert timed.tick() == 0
    clock.advance(1)
    assert timed.tick() == 1
    view = timed.describe(r.instance_id, include_events=True)
    (fired,) = events_of(view, "timer_fired")
    assert fired.at_ms == clock.now_ms()
    assert [t.state for t in view.tokens] == [TokenState.AWAITING]
    assert timed.next_due_ms() is None


def test_a_lease_expires_on_the_given_clock(timed: Engine, clock: VirtualClock) -> None:
    timed.register(SLOW)
    r = timed.start("slow", {})
    (task,) = timed.poll(["default"], "w", 1)
    assert task.lease_expires_at_ms == clock.now_ms() + 30_000
    clock.advance(30_000)
    assert timed.tick() == 0  # reclaimed once strictly past its expiry
    clock.advance(1)
    assert timed.tick() == 1
    assert timed.poll(["default"], "w", 1) == []  # the retry waits for its backoff
    clock.advance(300_000)
    timed.tick()
    (again,) = timed.poll(["default"], "w", 1)
    assert (again.task_id, again.attempt) == (task.task_id, 2)
    view = timed.describe(r.instance_id, include_events=True)
    assert [e.kind for e in view.events if e.kind in ("lease_expired", "step_retried")] == [
        "lease_expired",
        "step_retried",
    ]


def test_leadership_lapses_on_the_given_clock(database_url: str, clock: VirtualClock) -> None:
    a = Engine(database_url, node_id="a", clock=clock, leader_ttl_s=30)
    b = Engine(database_url, node_id="b", clock=clock, leader_ttl_s=30)
    try:
        a.register(NAP)
        r = a.start("nap", {})
        a.tick()
        assert b.tick() == 0 and not b.is_leader
        clock.advance(3_600_000)  # a's term lapsed long ago: b takes over and fires the sleep
        assert b.tick() == 1 and b.is_leader
        assert a.tick() == 0 and not a.is_leader
        assert a.describe(r.instance_id).status is InstanceStatus.RUNNING
    finally:
        a.close()
        b.close()


def test_moving_the_clock_wakes_the_ticker(timed: Engine, clock: VirtualClock) -> None:
    timed.wait_for_timers(0)  # forget anything armed before
    returned = threading.Event()
    waiter = threading.Thread(
        target=lambda: (timed.wait_for_timers(60), returned.set()), daemon=True
    )
    waiter.start()
    clock.advance(1)
    assert returned.wait(30)  # far below the 60 s it would otherwise sleep


def test_a_closed_engine_stops_watching_its_clock(database_url: str, clock: VirtualClock) -> None:
    eng = Engine(database_url, clock=clock)
    eng.close()
    assert clock._watchers == []


def test_an_engine_that_fails_to_open_never_watches_its_clock(
    database_url: str, clock: VirtualClock
) -> None:
    eng = Engine(database_url)
    eng.db.write(lambda c: c.execute(update(schema.schema_version).values(version=10**6)))
    eng.close()
    with pytest.raises(IncompatibleSchema):
        Engine(database_url, clock=clock)
    assert clock._watchers == []


def test_the_clock_refuses_to_go_back_by_advance(clock: VirtualClock) -> None:
    with pytest.raises(ValueError, match="negative"):
        clock.advance(-1)
    clock.set(0)
    assert clock.now_ms() == 0
