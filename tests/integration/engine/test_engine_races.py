"""Races between transitions of one instance: the row lock and the fences decide."""

from __future__ import annotations

import contextlib
import threading
import time

import psycopg
from engine_testkit import events_of
from sqlalchemy import make_url

from tests.waiting import wait_until
from wiggle.compiler import load_flow
from wiggle.engine import Engine, InstanceStatus, TokenState
from wiggle.errors import InstanceNotRunning, SignalNotAwaited, StaleLease

LIN = load_flow("wiggle: 1\nname: lin\nsteps:\n  - task: a\n  - await: s\n  - task: b\n")


def _wait_for_a_lock_wait(url: str, timeout: float = 30.0) -> None:
    """Until a backend of this database waits for a lock (the report, behind our row lock)."""
    with psycopg.connect(url, autocommit=True) as watcher:

        def waiting() -> int:
            (n,) = watcher.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND wait_event_type = 'Lock'"
            ).fetchone() or (0,)
            return int(n)

        wait_until(waiting, timeout, "the report waiting for the lock", interval=0.01)


def test_a_report_that_waited_for_the_lock_sees_the_cancel(postgres_database_url):
    """PostgreSQL: a report blocked on the instance lock must see what the holder committed."""
    database_url = postgres_database_url
    e = Engine(database_url)
    try:
        e.register(LIN)
        r = e.start("lin", {})
        (task,) = e.poll(["default"], "w", 1)
        libpq = make_url(database_url).set(drivername="postgresql")
        with psycopg.connect(libpq.render_as_string(hide_password=False)) as other:
            other.execute(
                "SELECT id FROM wiggle_instances WHERE id = %s FOR UPDATE", (r.instance_id,)
            )
            got: list[object] = []
            t = threading.Thread(target=lambda: got.append(e.complete(task.task_id, task.lease, 1)))
            t.start()
            _wait_for_a_lock_wait(libpq.render_as_string(hide_password=False))
            assert t.is_alive()
            other.execute(
                "UPDATE wiggle_instances SET status = 'CANCELLED', reason = 'cancelled' "
                "WHERE id = %s",
                (r.instance_id,),
            )
            other.execute(
                "UPDATE wiggle_tokens SET state = 'DONE' WHERE instance_id = %s", (r.instance_id,)
            )
            other.commit()
            t.join(10)
        assert got == [InstanceStatus.CANCELLED]
        (tok,) = e.describe(r.instance_id).tokens
        assert (tok.node_id, tok.state) == ("a", TokenState.DONE)
    finally:
        e.close()


def test_cancel_racing_workers_and_signals_leaves_nothing_alive(database_url):
    engines = [Engine(database_url, node_id=f"e{i}") for i in range(2)]
    try:
        engines[0].register(LIN)
        ids = [engines[0].start("lin", {"i": i}).instance_id for i in range(40)]
        stop = threading.Event()
        errors: list[BaseException] = []

        def worker(engine: Engine) -> None:
            try:
                while not stop.is_set():
                    for t in engine.poll(["default"], engine.node_id, 4):
                        # StaleLease: lost to a cancel that committed first, by design.
                        with contextlib.suppress(StaleLease):
                            engine.complete(t.task_id, t.lease, t.input)
                    time.sleep(0.001)
            except BaseException as exc:
                errors.append(exc)

        # No instance can finish before the first cancel is in (each waits for its signal), so
        # at least that cancel wins; the rest race the workers and the signals.
        first_cancel_in = threading.Event()

        def signaller(engine: Engine) -> None:
            try:
                first_cancel_in.wait(60)
                for i in ids:
                    with contextlib.suppress(InstanceNotRunning, SignalNotAwaited):
                        engine.signal(i, "s", None)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(e,)) for e in engines]
        threads.append(threading.Thread(target=signaller, args=(engines[1],)))
        for t in threads:
            t.start()
        for i in ids[::2]:
            with contextlib.suppress(InstanceNotRunning):  # it may have completed first
                engines[0].cancel(i)
            first_cancel_in.set()
        # The workers and the signaller finish every instance that was not cancelled.
        deadline = time.monotonic() + 60
        while any(engines[0].describe(i).status is InstanceStatus.RUNNING for i in ids):
            assert time.monotonic() < deadline and not errors, errors or "instances left running"
            time.sleep(0.02)
        stop.set()
        for t in threads:
            t.join()
        assert errors == []
        statuses = [engines[0].describe(i).status for i in ids]
        assert InstanceStatus.CANCELLED in statuses, "no cancel won its race: nothing was tested"
        for i in ids:
            view = engines[0].describe(i, include_events=True)
            if view.status is InstanceStatus.CANCELLED:
                assert {t.state for t in view.tokens} == {TokenState.DONE}
                kinds = [ev.kind for ev in view.events]
                after = kinds[kinds.index("instance_cancelled") + 1 :]
                assert after == []  # nothing happens to an instance after its cancel
                assert events_of(view, "instance_completed") == []
    finally:
        for e in engines:
            e.close()
