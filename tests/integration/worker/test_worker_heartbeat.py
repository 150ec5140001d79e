"""Heartbeats keep a lease alive through a step (or a local run) longer than the lease."""

from __future__ import annotations

import threading
import time

import pytest

from wiggle.worker import Registry, Worker, step

pytestmark = pytest.mark.timeout(60)

#: The steps' lease (their timeout), and the slow step's length: three leases.
LEASE_S = 2.0
SLOW_S = 3 * LEASE_S

FLOW = """
wiggle: 1
name: long
execution: {mode}
steps:
  - {{task: quick, timeout: 2s}}
  - {{task: slow, timeout: 2s, retry: {{initial: 50ms}}}}
  - {{task: quick2, timeout: 2s}}
"""

#: A run is tried again (up to this many runs in all) when it lost its lease while this process
#: was kept from running for a third of a lease or more (the heartbeats' own margin): the
#: machine, not the worker, made it late. A re-execution with no such stall fails at once.
TRIES = 3


class Stalls:
    """The longest this process waited for the CPU while watching: a thread that sleeps 20 ms
    at a time and measures how late each wake-up came."""

    def __init__(self) -> None:
        self.longest_s = 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._done.is_set():
            began = time.monotonic()
            time.sleep(0.02)
            self.longest_s = max(self.longest_s, time.monotonic() - began - 0.02)

    def __enter__(self) -> Stalls:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()


@pytest.mark.parametrize("mode", ["SERVER", "LOCAL_SYNC", "LOCAL_ASYNC"])
def test_a_step_three_times_its_lease_runs_once(stack, mode):
    flow = stack.deploy(FLOW.format(mode=mode))
    stalls: list[float] = []
    for _ in range(TRIES):
        runs: list[tuple[str, int]] = []
        lock = threading.Lock()
        reg = Registry()

        def make(name: str, seconds: float, runs=runs, lock=lock):
            def fn(ctx):
                with lock:
                    runs.append((name, step().attempt))
                time.sleep(seconds)
                return {**ctx, name: True}

            return fn

        reg.register(make("quick", 0.0), "quick")
        reg.register(make("slow", SLOW_S), "slow")
        reg.register(make("quick2", 0.0), "quick2")
        with Stalls() as watch, Worker(stack.address, registry=reg, poll_wait_ms=500):
            started = stack.client.start(flow.name, {}, version=flow.version)
            view = stack.wait_finished(started.instance_id)
        if view.status == "COMPLETED" and runs == [("quick", 1), ("slow", 1), ("quick2", 1)]:
            break
        stalls.append(watch.longest_s)
        assert watch.longest_s >= LEASE_S / 3, (
            f"{view.status} ({view.reason}) after {runs}, with no stall of a third of a lease "
            f"(the longest: {watch.longest_s:.2f} s)"
        )
    else:
        pytest.fail(f"every run stalled past a third of its lease: {stalls}")
    assert view.context == {"quick": True, "slow": True, "quick2": True}
