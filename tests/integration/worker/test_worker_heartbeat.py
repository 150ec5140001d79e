"""Heartbeats keep a lease alive through a step (or a local run) longer than the lease."""

from __future__ import annotations

import threading
import time

import pytest

from wiggle.worker import Registry, Worker, step

pytestmark = pytest.mark.timeout(60)

FLOW = """
wiggle: 1
name: long
execution: {mode}
steps:
  - {{task: quick, timeout: 1s}}
  - {{task: slow, timeout: 1s, retry: {{initial: 50ms}}}}
  - {{task: quick2, timeout: 1s}}
"""


@pytest.mark.parametrize("mode", ["SERVER", "LOCAL_SYNC", "LOCAL_ASYNC"])
def test_a_step_three_times_its_lease_runs_once(stack, mode):
    runs: list[tuple[str, int]] = []
    lock = threading.Lock()
    reg = Registry()

    def make(name: str, seconds: float):
        def fn(ctx):
            with lock:
                runs.append((name, step().attempt))
            time.sleep(seconds)
            return {**ctx, name: True}

        return fn

    reg.register(make("quick", 0.0), "quick")
    reg.register(make("slow", 3.0), "slow")
    reg.register(make("quick2", 0.0), "quick2")
    flow = stack.deploy(FLOW.format(mode=mode))
    with Worker(stack.address, registry=reg, poll_wait_ms=500):
        started = stack.client.start(flow.name, {}, version=flow.version)
        view = stack.wait_finished(started.instance_id)
    assert view.status == "COMPLETED", view.reason
    assert runs == [("quick", 1), ("slow", 1), ("quick2", 1)]
    assert view.context == {"quick": True, "slow": True, "quick2": True}
