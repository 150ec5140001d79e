"""The leader: election with a strictly increasing term, failover, exactly-once timers.

The engines share a virtual clock: a timer falls due, or a term lapses, when the test moves the
clock (the tests of real threads racing, and of a frozen leader, run on real time on purpose).
"""

from __future__ import annotations

import functools
import threading
import time

from engine_testkit import events_of
from sqlalchemy import Connection, event, select

from tests.waiting import wait_until
from wiggle.compiler import load_flow
from wiggle.engine import Engine, InstanceStatus, TokenState
from wiggle.engine.ops import ticker as _ticker
from wiggle.engine.ops.leader import acquire_stmt
from wiggle.engine.store import schema as schema

NAP = load_flow("wiggle: 1\nname: nap\nsteps:\n  - sleep: 100ms\n  - await: never\n")


def term_and_holder(engine: Engine) -> tuple[int, str]:
    row = engine.db.read(
        lambda c: c.execute(select(schema.leader.c.term, schema.leader.c.holder)).one()
    )
    return int(row.term), str(row.holder)


def timer_events(engine: Engine, instance_id: str) -> int:
    view = engine.describe(instance_id, include_events=True)
    return len(events_of(view, "timer_fired"))


def test_one_leader_at_a_time_and_the_term_grows(database_url, clock):
    a = Engine(database_url, node_id="a", leader_ttl_s=30, clock=clock)
    b = Engine(database_url, node_id="b", leader_ttl_s=30, clock=clock)
    try:
        a.register(NAP)
        r = a.start("nap", {})
        a.tick()
        t1, holder = term_and_holder(a)
        assert holder == "a"
        clock.advance(100)  # the sleep is due now
        assert b.tick() == 0  # not the leader: fires nothing
        assert a.tick() == 1
        assert term_and_holder(a) == (t1, "a")  # renewal keeps the term
        a.close()  # steps down at once
        b.tick()
        t2, holder = term_and_holder(b)
        assert holder == "b" and t2 > t1
        assert timer_events(b, r.instance_id) == 1
    finally:
        b.close()


def test_failover_keeps_timers_firing_exactly_once(database_url, clock):
    a = Engine(database_url, node_id="a", leader_ttl_s=0.4, clock=clock)
    b = Engine(database_url, node_id="b", leader_ttl_s=0.4, clock=clock)
    try:
        a.register(NAP)
        ids = [a.start("nap", {"i": i}).instance_id for i in range(20)]
        a.tick()  # a leads, then dies without stepping down (no close, no more ticks)
        clock.advance(100)  # the sleeps fall due while a's term still runs
        assert b.tick() == 0
        clock.advance(400)  # a's term lapses: b takes over and fires every sleep once
        while b.tick():
            pass
        views = [b.describe(i) for i in ids]
        assert all(any(t.state is TokenState.AWAITING for t in v.tokens) for v in views)
        assert term_and_holder(b)[1] == "b"
        assert [timer_events(b, i) for i in ids] == [1] * 20
    finally:
        a.close()
        b.close()


def test_two_engines_ticking_concurrently_fire_each_timer_once(database_url):
    engines = [Engine(database_url, node_id=f"e{i}", leader_ttl_s=0.2) for i in range(2)]
    try:
        engines[0].register(NAP)
        ids = [engines[0].start("nap", {"i": i}).instance_id for i in range(30)]
        stop = threading.Event()
        errors: list[BaseException] = []

        def ticker(engine: Engine, pause: float) -> None:
            try:
                while not stop.is_set():
                    engine.tick()
                    time.sleep(pause)
            except BaseException as exc:
                errors.append(exc)

        threads = [
            threading.Thread(target=ticker, args=(e, p))
            for e, p in zip(engines, (0.01, 0.13), strict=True)
        ]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 20
        try:
            while time.monotonic() < deadline:
                done = sum(timer_events(engines[0], i) > 0 for i in ids)
                if done == len(ids):
                    break
                time.sleep(0.05)
        finally:
            stop.set()
            for t in threads:
                t.join()
        assert errors == []
        assert [timer_events(engines[0], i) for i in ids] == [1] * 30
    finally:
        for e in engines:
            e.close()


def test_a_timer_raced_by_two_engines_fires_once(database_url, clock):
    """Bypass the election: both engines run the fire transaction for the same timer."""
    a = Engine(database_url, node_id="a", clock=clock)
    b = Engine(database_url, node_id="b", clock=clock)
    try:
        a.register(NAP)
        r = a.start("nap", {})
        clock.advance(100)
        (tok,) = a.describe(r.instance_id).tokens
        assert tok.state is TokenState.WAITING
        barrier = threading.Barrier(2)
        results: list[int] = []

        def fire(engine: Engine) -> None:
            barrier.wait()
            fn = functools.partial(
                _ticker._fire,
                engine.ops,
                token_id=tok.token_id,
                state="WAITING",
                wake=tok.wake_at_ms,
            )
            results.append(_ticker._once(engine.ops, fn))

        threads = [threading.Thread(target=fire, args=(e,)) for e in (a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(results) == [0, 1]
        assert timer_events(a, r.instance_id) == 1
        assert a.describe(r.instance_id).status is InstanceStatus.RUNNING
    finally:
        a.close()
        b.close()


def test_next_wakeup_tracks_the_earliest_timer(database_url, clock):
    e = Engine(database_url, leader_ttl_s=30, clock=clock)
    follower = Engine(database_url, node_id="follower", leader_ttl_s=30, clock=clock)
    try:
        e.tick()
        follower.tick()
        assert e.next_wakeup_s() == 10.0  # nothing pending: the leader renewal cadence
        e.register(load_flow("wiggle: 1\nname: long\nsteps:\n  - sleep: 1h\n"))
        e.start("long", {})
        assert 0 < e.next_wakeup_s() <= 10.0
        e.register(NAP)
        e.start("nap", {})
        assert e.next_wakeup_s() == 0.101  # a hair after the sleep of 100 ms
        clock.advance(200)
        assert e.next_wakeup_s() == 0.0  # overdue
        assert follower.next_wakeup_s() == 10.0  # only the leader fires it: no spinning
    finally:
        follower.close()
        e.close()


def test_a_leader_frozen_mid_renewal_loses_its_session_and_a_standby_takes_over(
    postgres_database_url,
):
    """A leader frozen (SIGSTOP, a paused VM) between its renewal's UPDATE of the leader row and
    the COMMIT holds that row's lock; the standby's election waits on it. Without the engine's
    idle_in_transaction_session_timeout it waited for as long as the leader stayed frozen
    (tests/faults/test_leader_stop.py once ran into its 60 s that way). With it, PostgreSQL
    ends the frozen session after the timeout (by default the leader lease), the standby takes
    over within about that plus the lease, and the old leader, continued, runs its renewal again
    on a new connection as a follower and fires no timer twice."""
    lease = 2.0
    a = Engine(postgres_database_url, node_id="a", leader_ttl_s=lease)
    b = Engine(postgres_database_url, node_id="b", leader_ttl_s=lease)
    stop = threading.Event()
    errors: list[BaseException] = []
    ended: list[str | None] = []  # the SQLSTATE of each statement of a that failed
    event.listen(
        a.db.sa,
        "handle_error",
        lambda ctx: ended.append(getattr(ctx.original_exception, "sqlstate", None)),
    )

    def standby() -> None:  # b's ticker, as a server runs it
        try:
            while not stop.is_set():
                b.tick()
                stop.wait(b.next_wakeup_s())
        except BaseException as exc:
            errors.append(exc)

    ticker = threading.Thread(target=standby)
    try:
        a.tick()
        term, holder = term_and_holder(a)
        assert holder == "a"
        a.register(NAP)
        instance = a.start("nap", {}).instance_id  # its sleep falls due while a is frozen
        bound = a.db.idle_in_transaction_timeout_s + lease + 10.0
        runs: list[int | None] = []

        def renew_then_freeze(conn: Connection) -> int | None:
            got = conn.execute(acquire_stmt(a.db), {"me": "a", "ttl_ms": int(lease * 1000)})
            runs.append(got.scalar())
            if len(runs) == 1:
                # Frozen here, the leader row locked and the renewal not committed, until the
                # standby holds the lead (its own reads are not blocked by the row lock).
                wait_until(lambda: term_and_holder(b)[1] == "b", bound, "the standby taking over")
            return runs[-1]

        ticker.start()
        a.db.write(renew_then_freeze, idempotent=True)
        assert "25P03" in ended  # PostgreSQL ended the frozen session (idle in transaction)
        assert len(runs) == 2  # ... and the renewal ran again on a new connection
        new_term, _ = term_and_holder(b)
        assert new_term > term
        wait_until(lambda: timer_events(b, instance) == 1, 30, "the standby firing the sleep")
        a.tick()  # the old leader, continued
        assert timer_events(a, instance) == 1
        assert errors == []
        # By default the timeout is the leader lease, set on every session of the engine.
        assert a.db.idle_in_transaction_timeout_s == lease
        show = "SHOW idle_in_transaction_session_timeout"
        assert a.db.read(lambda c: c.exec_driver_sql(show).scalar()) == "2s"
    finally:
        stop.set()
        if ticker.is_alive():
            ticker.join()
        a.close()
        b.close()
