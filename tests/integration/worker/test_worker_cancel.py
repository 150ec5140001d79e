"""Cancelling an instance while a worker runs it locally: the run stops at the next step."""

from __future__ import annotations

import threading

import pytest

from wiggle.worker import Registry, Worker

pytestmark = pytest.mark.timeout(60)

FLOW = """
wiggle: 1
name: cancel-me
execution: {mode}
steps:
  - {{task: first, timeout: 1s}}
  - {{task: blocker, timeout: 1s}}
  - {{task: after, timeout: 1s}}
"""


@pytest.mark.parametrize("mode", ["SERVER", "LOCAL_SYNC", "LOCAL_ASYNC"])
def test_a_cancelled_instance_runs_no_further_step(stack, wait_until, mode):
    entered = threading.Event()
    release = threading.Event()
    ran: list[str] = []
    reg = Registry()
    reg.register(lambda ctx: ran.append("first") or ctx, "first")

    @reg.activity
    def blocker(ctx):
        ran.append("blocker")
        entered.set()
        # Outlive a heartbeat or two, so the worker hears of the cancellation mid-step.
        release.wait(10)
        return ctx

    reg.register(lambda ctx: ran.append("after") or ctx, "after")
    flow = stack.deploy(FLOW.format(mode=mode))
    with Worker(stack.address, registry=reg, poll_wait_ms=300) as worker:
        started = stack.client.start(flow.name, {}, version=flow.version)
        assert entered.wait(15)
        stack.client.cancel(started.instance_id, "changed my mind")
        # The heartbeat of the blocked step (every ~1/3 s) learns the instance is CANCELLED.
        wait_until(
            lambda: any(lease.lost for lease in list(worker._keeper._leases.values())),
            timeout=5,
            what="the lease marked lost",
        )
        release.set()
        view = stack.wait_finished(started.instance_id)
        wait_until(lambda: worker.free_slots == worker.concurrency, what="the run to end")
    assert view.status == "CANCELLED"
    assert ran == ["first", "blocker"]
