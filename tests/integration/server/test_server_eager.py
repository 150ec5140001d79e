"""Eager start (docs/worker-protocol.md) and a real Worker end to end, over loopback gRPC."""

from __future__ import annotations

import threading
import time

import orjson
import pytest

from wiggle._proto.wiggle.v1 import wiggle_pb2 as pb
from wiggle.client import InstanceStatus
from wiggle.worker import Registry, Worker


def _registry() -> Registry:
    registry = Registry()

    @registry.activity
    def hello(ctx):
        return {**ctx, "hello": True}

    @registry.activity
    def bye(ctx):
        return {**ctx, "bye": True}

    return registry


@pytest.fixture
def worker(server):
    w = Worker(server.address, registry=_registry(), concurrency=2, poll_wait_ms=2_000)
    w.start()
    yield w
    w.stop()


def test_eager_start_returns_the_first_task(client, stub, flows):
    client.deploy(flows["greet"])
    reply = stub.StartInstance(
        pb.StartInstanceRequest(
            flow="greet",
            input=b'{"name": "ada"}',
            eager=pb.EagerDispatch(worker_id="w-eager", queues=["default"]),
        )
    )
    assert reply.HasField("eager_task")
    task = reply.eager_task
    assert task.node_id == "hello" and task.instance_id == reply.instance_id and task.lease
    assert orjson.loads(task.input) == {"name": "ada"}
    # The task is leased to the starting worker: nobody else can poll it.
    poll = pb.PollTasksRequest(worker_id="other", queues=["default"], wait_ms=200)
    assert len(stub.PollTasks(poll).tasks) == 0
    view = client.describe(reply.instance_id)
    assert [(t.node_id, t.state, t.lease_owner) for t in view.tokens] == [
        ("hello", "LEASED", "w-eager")
    ]


def test_eager_start_without_a_matching_queue_falls_back(client, stub, flows):
    client.deploy(flows["greet"])
    reply = stub.StartInstance(
        pb.StartInstanceRequest(
            flow="greet",
            input=b'{"name": "ada"}',
            eager=pb.EagerDispatch(worker_id="w-eager", queues=["elsewhere"]),
        )
    )
    assert not reply.HasField("eager_task")
    poll = pb.PollTasksRequest(worker_id="other", queues=["default"], wait_ms=2_000)
    assert len(stub.PollTasks(poll).tasks) == 1


def test_client_start_with_a_worker_runs_eagerly(client, worker, flows):
    client.deploy(flows["greet"])
    started = client.start("greet", {"name": "ada"}, worker=worker)
    assert started.eager
    view = client.wait(started.instance_id, timeout=30, events=True)
    assert view.status is InstanceStatus.COMPLETED
    assert view.context == {"name": "ada", "hello": True, "bye": True}
    first = next(e for e in view.events if e.kind == "step_started")
    assert first.node_id == "hello"


def test_client_start_falls_back_when_no_slot_is_free(client, worker, flows):
    client.deploy(flows["greet"])
    held = [worker.reserve_eager_slot() for _ in range(worker.concurrency)]
    assert all(held) and worker.reserve_eager_slot() is None
    started = client.start("greet", {"name": "bob"}, worker=worker)
    assert not started.eager
    for slot in held:
        slot.release()
    view = client.wait(started.instance_id, timeout=30)
    assert view.status is InstanceStatus.COMPLETED


@pytest.mark.parametrize("mode", ["SERVER", "LOCAL_SYNC", "LOCAL_ASYNC"])
def test_worker_runs_each_mode_end_to_end(client, worker, flows, mode):
    source = flows["greet"].replace(b"name: greet\n", f"name: greet\nexecution: {mode}\n".encode())
    deployed = client.deploy(source)
    ids = [client.start("greet", {"name": str(i)}).instance_id for i in range(5)]
    began = time.monotonic()
    for iid in ids:
        view = client.wait(iid, timeout=30)
        assert view.status is InstanceStatus.COMPLETED, view.reason
        assert view.execution_mode == mode and view.version == deployed.version
        assert view.context["hello"] and view.context["bye"]
    assert time.monotonic() - began < 30


def _parked_poll(stub, server, worker_id: str, results: list) -> threading.Thread:
    """A PollTasks of `worker_id` in a thread, returned once the server holds it open."""
    request = pb.PollTasksRequest(worker_id=worker_id, queues=["default"], wait_ms=10_000)
    poller = threading.Thread(target=lambda: results.append(stub.PollTasks(request)))
    poller.start()
    deadline = time.monotonic() + 10
    while not server._service._polls.parked():
        assert time.monotonic() < deadline, "the poll never parked"
        time.sleep(0.005)
    return poller


def test_a_plain_start_hands_its_first_task_to_a_parked_poll(client, stub, server, flows):
    """A client with no worker of its own starts an instance while a worker waits in a long
    poll on this server: the first task is leased to that worker in the start's own
    transaction and the poll answers with it, with no claim of its own."""
    client.deploy(flows["greet"])
    results: list = []
    poller = _parked_poll(stub, server, "w-parked", results)
    started = client.start("greet", {"name": "ada"})
    poller.join(10)
    (answer,) = results
    (task,) = answer.tasks
    assert (task.instance_id, task.node_id) == (started.instance_id, "hello")
    assert not started.eager  # the start's caller runs nothing: the poll's worker does
    view = client.describe(started.instance_id, events=True)
    assert [(t.node_id, t.state, t.lease_owner) for t in view.tokens] == [
        ("hello", "LEASED", "w-parked")
    ]
    first = next(e for e in view.events if e.kind == "step_started")
    assert first.detail == {"worker": "w-parked", "eager": True}
    # An ordinary task from here on: its worker completes it under the lease it was given.
    stub.CompleteTask(
        pb.CompleteTaskRequest(task_id=task.task_id, lease=task.lease, result=b"{}", seq=1)
    )
    assert [t.node_id for t in client.describe(started.instance_id).tokens] == ["bye"]


def test_a_start_whose_first_task_is_elsewhere_leaves_the_poll_waiting(client, stub, server):
    client.deploy(b"wiggle: 1\nname: away\nsteps:\n  - {task: far, queue: other}\n")
    results: list = []
    poller = _parked_poll(stub, server, "w-parked", results)
    started = client.start("away", {})
    assert [t.state for t in client.describe(started.instance_id).tokens] == ["READY"]
    stub.EndPolls(pb.EndPollsRequest(worker_id="w-parked"))
    poller.join(10)
    assert [len(r.tasks) for r in results] == [0]
