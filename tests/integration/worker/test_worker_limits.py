"""Big contexts and results through a real worker and server, on both backends.

A LOCAL_ASYNC run whose buffered contexts add up to more than the server takes in one request
flushes before it gets there; a step whose result is over the payload limit fails at once,
non-retryably, saying which limit it broke, instead of re-running until its attempts run out.
Steps have short timeouts and one or three attempts, so the old behaviour (a refused report,
then a lease expiry) shows up as a FAILED instance rather than a slow test.
"""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from wiggle.server import Server, ServerConfig
from wiggle.worker import Registry, Worker

pytestmark = pytest.mark.timeout(180)

MB = 1024 * 1024

TEN = """
wiggle: 1
name: ten
execution: LOCAL_ASYNC
steps:
{steps}
"""


def ten_steps() -> str:
    return "\n".join(
        f"  - {{task: s{i}, timeout: 10s, retry: {{max_attempts: 1}}}}" for i in range(10)
    )


def test_a_local_async_run_of_eighteen_megabytes_is_flushed_in_parts(stack):
    # A new worker reports its first step alone; the nine after it, 2 MB of context each, would
    # make an 18 MB AdvanceRun, over the server's limit (4 x 4 MB + 1 MB). The worker must
    # flush before a batch gets that big.
    flow = stack.deploy(TEN.format(steps=ten_steps()))
    reg = Registry()
    for i in range(10):
        reg.register(lambda ctx, i=i: {"done": [*ctx["done"], i], "pad": "x" * (2 * MB)}, f"s{i}")
    with Worker(stack.address, registry=reg, poll_wait_ms=500):
        started = stack.client.start(flow.name, {"done": []}, version=flow.version)
        view = stack.wait_finished(started.instance_id, timeout=120)
    assert view.status == "COMPLETED", view.reason
    assert view.context["done"] == list(range(10))
    completed = [e for e in view.events if e.kind == "step_completed"]
    assert [e.node_id for e in completed] == [f"s{i}" for i in range(10)]


BIG = """
wiggle: 1
name: big
execution: {mode}
steps:
  - task: small
  - task: big
    timeout: 3s
    retry: {{max_attempts: 3, initial: 10ms}}
  - task: never
"""


def big_registry(size: int, executed: Counter[str]) -> Registry:
    reg = Registry()
    lock = threading.Lock()

    def track(name: str) -> None:
        with lock:
            executed[name] += 1

    @reg.activity
    def small(ctx):
        track("small")
        return {"small": True}

    @reg.activity
    def big(ctx):
        track("big")
        return {**ctx, "pad": "x" * size}

    @reg.activity
    def never(ctx):
        track("never")
        return ctx

    return reg


@pytest.mark.parametrize("mode", ["SERVER", "LOCAL_SYNC", "LOCAL_ASYNC"])
def test_a_five_megabyte_result_fails_the_step_at_once(stack, mode):
    flow = stack.deploy(BIG.format(mode=mode))
    executed: Counter[str] = Counter()
    with Worker(stack.address, registry=big_registry(5 * MB, executed), poll_wait_ms=500):
        started = stack.client.start(flow.name, {}, version=flow.version)
        view = stack.wait_finished(started.instance_id, timeout=60)
    assert view.status == "FAILED"
    assert "max_payload_bytes" in view.reason and str(4 * MB) in view.reason, view.reason
    assert executed == Counter({"small": 1, "big": 1}), executed  # no retry, nothing after


def test_a_result_too_big_for_any_request_is_failed_by_the_worker(stack):
    # 20 MB is over the server's whole-request limit: gRPC refuses such a request before the
    # server sees it, so only the worker's own check can turn it into a step failure.
    flow = stack.deploy(BIG.format(mode="SERVER"))
    executed: Counter[str] = Counter()
    with Worker(stack.address, registry=big_registry(20 * MB, executed), poll_wait_ms=500):
        started = stack.client.start(flow.name, {}, version=flow.version)
        view = stack.wait_finished(started.instance_id, timeout=60)
    assert view.status == "FAILED"
    assert "max_payload_bytes" in view.reason, view.reason
    assert executed == Counter({"small": 1, "big": 1}), executed


def test_a_smaller_server_limit_reaches_the_worker(stack):
    server = Server(
        stack.engine, ServerConfig(address="127.0.0.1:0", grace_s=0.5, max_payload_bytes=MB)
    )
    server.start()
    try:
        flow = stack.deploy(BIG.format(mode="LOCAL_ASYNC"))
        executed: Counter[str] = Counter()
        with Worker(server.address, registry=big_registry(2 * MB, executed), poll_wait_ms=500):
            started = stack.client.start(flow.name, {}, version=flow.version)
            view = stack.wait_finished(started.instance_id, timeout=60)
    finally:
        server.stop(grace=0.5)
    assert view.status == "FAILED"
    assert str(MB) in view.reason, view.reason
    assert executed == Counter({"small": 1, "big": 1}), executed
