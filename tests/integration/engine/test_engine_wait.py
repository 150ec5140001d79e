"""Engine.wait_view (WaitInstance): woken by this process's finish after its commit, and by
another process's finish through the bounded re-read; never a write."""

from __future__ import annotations

import threading

import pytest

from wiggle.compiler import load_flow
from wiggle.engine import Engine, InstanceStatus
from wiggle.errors import InstanceNotFound

GATE = load_flow("wiggle: 1\nname: gate\nsteps:\n  - await: go\n")


def _wait_in_thread(engine: Engine, iid: str) -> tuple[threading.Thread, list[InstanceStatus]]:
    got: list[InstanceStatus] = []
    thread = threading.Thread(target=lambda: got.append(engine.wait_view(iid, 60.0).status))
    thread.start()
    return thread, got


@pytest.mark.parametrize("same_engine", [True, False], ids=["same-process", "other-process"])
def test_wait_returns_when_the_instance_ends(database_url, same_engine):
    waiter = Engine(database_url)
    finisher = waiter if same_engine else Engine(database_url)
    try:
        waiter.register(GATE)
        iid = waiter.start("gate", None).instance_id
        assert waiter.wait_view(iid, 0.0).status is InstanceStatus.RUNNING
        thread, got = _wait_in_thread(waiter, iid)
        finisher.signal(iid, "go", None)
        thread.join(30)
        assert not thread.is_alive() and got == [InstanceStatus.COMPLETED]
        assert waiter.waiters._instances == {}  # nothing left registered
    finally:
        if finisher is not waiter:
            finisher.close()
        waiter.close()


def test_wait_on_an_unknown_instance_is_not_found(database_url):
    engine = Engine(database_url)
    try:
        with pytest.raises(InstanceNotFound):
            engine.wait_view("ghost", 1.0)
    finally:
        engine.close()


def test_a_closing_engine_ends_waits(database_url):
    engine = Engine(database_url)
    try:
        engine.register(GATE)
        iid = engine.start("gate", None).instance_id
        thread, got = _wait_in_thread(engine, iid)
        engine._stop.set()  # what close() sets first
        engine.wake()
        thread.join(30)
        assert got == [InstanceStatus.RUNNING]
    finally:
        engine.close()


def test_one_shared_reread_wakes_every_waiter_of_instances_ended_elsewhere(database_url):
    # Twelve waiters in one process, their instances ended by another: the waiting process
    # re-reads them all in one query at most every FINISH_RECHECK_S (not one query per waiter),
    # and that read wakes each waiter, including those that did not make it.
    waiter, finisher = Engine(database_url), Engine(database_url)
    try:
        waiter.register(GATE)
        ids = [waiter.start("gate", None).instance_id for _ in range(12)]
        waiting = [_wait_in_thread(waiter, iid) for iid in ids]
        for iid in ids:
            finisher.signal(iid, "go", None)
        for thread, got in waiting:
            thread.join(timeout=30)
            assert not thread.is_alive(), "a waiter was never woken"
            assert got == [InstanceStatus.COMPLETED]
    finally:
        waiter.close()
        finisher.close()
