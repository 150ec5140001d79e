"""Lost answers and drains, deterministic: a real worker and server with an interceptor that
loses chosen answers after their commit, or holds a poll's answer while the worker stops.

Steps run at most once here (`max_attempts: 1`), so anything a worker strands shows as a FAILED
instance ("lease expired"), and `max_iterations` equals the loop's target, so a batch applied
twice shows as "loop exceeded max_iterations".
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest

from wiggle.server import Server, ServerConfig
from wiggle.worker import Registry, Worker

pytestmark = pytest.mark.timeout(120)

TARGET = 5

LOOP = """
wiggle: 1
name: loop
execution: {mode}
steps:
  - loop:
      steps: [{{task: inc, timeout: 2s, retry: {{max_attempts: 1}}}}]
      while: more
      max_iterations: {target}
    timeout: 2s
    retry: {{max_attempts: 1}}
"""


class Interceptor(grpc.ServerInterceptor):  # type: ignore[type-arg]
    """Runs `around(method, call)` instead of each unary call; `call()` runs the real one."""

    def __init__(self, around: Callable[[str, Callable[[], Any], Any], Any]) -> None:
        self._around = around

    def intercept_service(self, continuation: Any, details: Any) -> Any:
        handler = continuation(details)
        if handler is None or handler.unary_unary is None:
            return handler
        method = details.method.rsplit("/", 1)[-1]
        inner = handler.unary_unary

        def behavior(request: Any, context: grpc.ServicerContext) -> Any:
            return self._around(method, lambda: inner(request, context), context)

        return grpc.unary_unary_rpc_method_handler(
            behavior,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


@pytest.fixture
def faulty(stack) -> Iterator[Callable[..., Server]]:
    servers: list[Server] = []

    def start(around: Callable[[str, Callable[[], Any], Any], Any]) -> Server:
        server = Server(
            stack.engine,
            ServerConfig(address="127.0.0.1:0", grace_s=0.5),
            interceptors=[Interceptor(around)],
        )
        server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop(grace=0.2)


def loop_registry(executed: Counter[str]) -> Registry:
    reg = Registry()
    lock = threading.Lock()

    @reg.activity
    def inc(ctx):
        with lock:
            executed["inc"] += 1
        return {"n": ctx.get("n", 0) + 1}

    @reg.activity
    def more(ctx):
        with lock:
            executed["more"] += 1
        return ctx["n"] < TARGET

    return reg


def lose_every_second_report(batched: bool) -> Callable[[str, Callable[[], Any], Any], Any]:
    """Every second report call (AdvanceRun, or the ReportBatch carrying it) is committed, then
    its answer is lost (UNAVAILABLE). Unbatched, the server refuses ReportBatch as one that does
    not implement it would, so the worker sends each AdvanceRun alone."""

    def around(method: str, call: Callable[[], Any], context: Any) -> Any:
        if method == "ReportBatch" and not batched:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "no ReportBatch here")
        response = call()
        if method in ("AdvanceRun", "ReportBatch"):
            with _count_lock:
                _counts[method] += 1
                lose = _counts[method] % 2 == 0
            if lose:
                context.abort(grpc.StatusCode.UNAVAILABLE, "fault: answer lost after the commit")
        return response

    return around


_counts: Counter[str] = Counter()
_count_lock = threading.Lock()


@pytest.mark.parametrize("batched", [True, False], ids=["ReportBatch", "AdvanceRun"])
@pytest.mark.parametrize("mode", ["LOCAL_ASYNC", "LOCAL_SYNC"])
def test_a_report_resent_after_a_lost_answer_is_applied_once(stack, faulty, mode, batched):
    # LOCAL_ASYNC with batches of two reports [more=true, inc]: a batch that ends where it began,
    # which the lease and node alone cannot tell from a new one. LOCAL_SYNC: the resend of a
    # report already applied used to be refused, and the worker gave up its run, leaving the
    # task leased until it expired.
    _counts.clear()
    flow = stack.deploy(LOOP.format(mode=mode, target=TARGET))
    server = faulty(lose_every_second_report(batched))
    executed: Counter[str] = Counter()
    worker = Worker(server.address, registry=loop_registry(executed), local_batch_size=2)
    with worker:
        started = stack.client.start(flow.name, {}, version=flow.version)
        view = stack.wait_finished(started.instance_id, timeout=60)
    assert _counts["ReportBatch" if batched else "AdvanceRun"] >= 4  # answers were lost
    assert view.status == "COMPLETED", view.reason
    assert view.context == {"n": TARGET}
    completed = Counter(e.node_id for e in view.events if e.kind == "step_completed")
    assert completed == {"inc": TARGET, "more": TARGET}, completed
    assert executed == {"inc": TARGET, "more": TARGET}, executed


ONE = """
wiggle: 1
name: one
execution: {mode}
steps:
  - {{task: inc, timeout: 2s, retry: {{max_attempts: 1}}}}
"""


@pytest.mark.parametrize("mode", ["SERVER", "LOCAL_SYNC", "LOCAL_ASYNC"])
def test_a_drain_gives_back_what_its_last_poll_claimed(stack, faulty, mode):
    # The poll's answer is held on the server after its claim, until the worker has begun to
    # stop. Cancelling that poll would strand the task, leased to nobody, until its lease
    # expired: with one attempt allowed, the instance would fail without its step having run.
    claimed, stopping, answered = threading.Event(), threading.Event(), threading.Event()

    def hold_the_answer(method: str, call: Callable[[], Any], context: Any) -> Any:
        if method == "EndPolls":
            stopping.set()
        response = call()
        if method == "PollTasks" and len(response.tasks) > 0 and not claimed.is_set():
            claimed.set()
            stopping.wait(10)
            answered.set()
        return response

    flow = stack.deploy(ONE.format(mode=mode))
    server = faulty(hold_the_answer)
    executed: Counter[str] = Counter()
    first = Worker(server.address, registry=loop_registry(executed), poll_wait_ms=5_000)
    first.start()
    started = stack.client.start(flow.name, {}, version=flow.version)
    assert claimed.wait(30), "the poll claimed nothing"
    stopper = threading.Thread(target=first.stop)
    stopper.start()
    stopper.join(timeout=15)  # an old worker cancels the poll and returns without EndPolls
    stopping.set()
    assert answered.wait(15)
    stopper.join(timeout=15)
    assert not first.running
    assert executed == Counter(), "the stopping worker ran the step"
    with Worker(stack.address, registry=loop_registry(executed), poll_wait_ms=500):
        view = stack.wait_finished(started.instance_id, timeout=30)
    assert view.status == "COMPLETED", view.reason
    assert executed == {"inc": 1}
    assert not [e for e in view.events if e.kind == "lease_expired"]
