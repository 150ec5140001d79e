"""Worker lifecycle over a fake stub: polling, eager slots (docs/worker-protocol.md), drain."""

from __future__ import annotations

import logging
import threading
import time

import grpc
import orjson
import pytest

from tests.waiting import wait_until
from wiggle._proto.wiggle.v1 import wiggle_pb2 as pb
from wiggle.worker import EagerSlot, Registry, Worker
from wiggle.worker._eager import Slots

pytestmark = pytest.mark.timeout(20)


def test_slots_take_give_and_wait():
    slots = Slots(2)
    assert slots.take(5) == 2
    assert slots.take(1) == 0
    assert not slots.wait_free(0.01)
    slots.give(1)
    assert slots.wait_free(0.01)
    slots.give(1)
    assert slots.wait_idle(0.01)
    with pytest.raises(ValueError):
        Slots(0)


def test_eager_slot_release_and_dispatch_happen_once():
    given: list[int] = []
    submitted: list[pb.Task] = []
    slot = EagerSlot(lambda t: submitted.append(t) is None, lambda: given.append(1))
    assert slot.dispatch(pb.Task(task_id="a"))
    slot.release()  # a no-op after dispatch
    assert not slot.dispatch(pb.Task(task_id="b"))
    assert [t.task_id for t in submitted] == ["a"] and given == []

    other = EagerSlot(lambda t: True, lambda: given.append(1))
    other.release()
    other.release()
    assert given == [1]

    declined = EagerSlot(lambda t: False, lambda: given.append(2))
    assert not declined.dispatch(pb.Task(task_id="c"))
    assert given == [1, 2]  # a declined dispatch frees the slot


def server_task(task_id: str, activity: str, ctx) -> pb.Task:
    return pb.Task(
        task_id=task_id,
        lease="l-" + task_id,
        lease_expires_at_ms=int(time.time() * 1000) + 60_000,
        instance_id="i-" + task_id,
        flow="f",
        version="sha256:" + "0" * 64,
        node_id=activity,
        activity=activity,
        attempt=1,
        input=orjson.dumps(ctx),
        execution_mode=pb.ExecutionMode.SERVER,
        timeout_ms=60_000,
    )


def test_reserve_eager_slot_follows_the_worker_state_and_free_slots(harness):
    reg = Registry()
    reg.register(lambda ctx: {**ctx, "done": True}, "work")
    stub = harness("wiggle: 1\nname: f\nsteps: [{task: work}]\n", reg).stub
    worker = Worker("fake", registry=reg, concurrency=1, stub=stub, poll_wait_ms=50)
    assert worker.reserve_eager_slot() is None  # not started
    with worker:
        # The poller may hold the only slot for a moment while it polls; wait for a free one.
        slot = None
        deadline = time.monotonic() + 5
        while slot is None and time.monotonic() < deadline:
            slot = worker.reserve_eager_slot()
        assert slot is not None
        assert worker.reserve_eager_slot() is None  # concurrency 1: no second slot
        assert slot.dispatch(server_task("e1", "work", {"a": 1}))
        wait_until(lambda: bool(stub.requests("CompleteTask")))
        [complete] = stub.requests("CompleteTask")
        assert complete.task_id == "e1" and orjson.loads(complete.result) == {"a": 1, "done": True}
        # The slot came back once the task finished.
        wait_until(lambda: (s := worker.reserve_eager_slot()) is not None and (s.release() or True))
        assert worker.worker_id and worker.queues == ("default",)
    assert worker.reserve_eager_slot() is None  # stopped


def test_polled_tasks_run_and_polls_ask_for_free_slots(harness):
    reg = Registry()
    reg.register(lambda ctx: ctx + 1, "inc")
    stub = harness("wiggle: 1\nname: f\nsteps: [{task: inc}]\n", reg).stub
    handed = iter([[server_task("p1", "inc", 1), server_task("p2", "inc", 41)]])

    def poll(request):
        tasks = next(handed, None)
        if tasks is None:
            time.sleep(0.02)
            return pb.PollTasksResponse()
        return pb.PollTasksResponse(tasks=tasks)

    stub.answers["PollTasks"] = poll
    with Worker(
        "fake", registry=reg, queues=["default", "q2"], concurrency=4, stub=stub, worker_id="w-1"
    ) as worker:
        wait_until(lambda: len(stub.requests("CompleteTask")) == 2)
    results = sorted(orjson.loads(r.result) for r in stub.requests("CompleteTask"))
    assert results == [2, 42]
    first_poll = stub.requests("PollTasks")[0]
    assert first_poll.worker_id == "w-1" and list(first_poll.queues) == ["default", "q2"]
    assert first_poll.max_tasks == 4
    # The worker says who it is: its activities (so it is never leased a task it cannot run),
    # its slots and its SDK.
    assert list(first_poll.activities) == ["inc"]
    assert first_poll.slots == 4 and first_poll.sdk.startswith("wiggle-python/")
    assert not worker.running


DRAIN = """
wiggle: 1
name: drain
execution: LOCAL_ASYNC
steps: [{task: s0}, {task: s1}, {task: s2}]
"""


def test_stop_drains_a_local_run_with_a_shutdown_handback(harness):
    reg = Registry()
    started = threading.Event()
    release = threading.Event()
    executed: list[str] = []

    def s0(ctx):
        executed.append("s0")
        return ctx

    def s1(ctx):
        executed.append("s1")
        started.set()
        assert release.wait(5)
        return ctx

    reg.register(s0, "s0")
    reg.register(s1, "s1")
    reg.register(lambda ctx: executed.append("s2") or ctx, "s2")
    h = harness(DRAIN, reg)
    task = h.task(ctx={})
    handed = iter([[task]])
    h.stub.answers["PollTasks"] = lambda r: pb.PollTasksResponse(tasks=next(handed, []))
    worker = Worker("fake", registry=reg, stub=h.stub, poll_wait_ms=50)
    worker.start()
    assert started.wait(5)
    stopper = threading.Thread(target=worker.stop)
    stopper.start()
    wait_until(lambda: worker._env is not None and worker._env.draining.is_set())
    release.set()
    stopper.join(10)
    assert not stopper.is_alive()
    assert executed == ["s0", "s1"]
    assert h.stub.batches()[-1] == (["s1"], True, "shutdown") or h.stub.batches() == [
        (["s0", "s1"], True, "shutdown")
    ]


@pytest.mark.parametrize("answered", [False, True])
def test_a_refused_poll_backs_off_and_logs_once(harness, rpc_error, caplog, answered):
    reg = Registry()
    stub = harness("wiggle: 1\nname: f\nsteps: [{task: work}]\n", reg).stub

    class Rendezvous(rpc_error):  # what a failed streaming call's text looks like
        def __str__(self) -> str:
            return (
                "<_MultiThreadedRendezvous of RPC that terminated with:\n"
                '\tstatus = StatusCode.UNAVAILABLE\n\tdetails = "busy"\n'
                '\tdebug_error_string = "UNKNOWN:Error received from peer"\n>'
            )

    def refuse(request):
        raise Rendezvous(grpc.StatusCode.UNAVAILABLE, "busy", server=answered)

    stub.answers["PollTasks"] = refuse
    caplog.set_level(logging.WARNING, logger="wiggle.worker")
    with Worker("fake", registry=reg, stub=stub) as worker:
        wait_until(lambda: len(stub.requests("PollTasks")) >= 3)
        # A server that answers is reachable: eager starts are still welcome.
        slot = worker.reserve_eager_slot()
        assert (slot is not None) is answered
        if slot is not None:
            slot.release()
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1, messages
    assert ("refused" in messages[0]) is answered and ("unreachable" in messages[0]) is not answered
    assert "\n" not in messages[0] and "UNAVAILABLE: busy" in messages[0], messages[0]
