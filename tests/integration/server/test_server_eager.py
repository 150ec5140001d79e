"""Eager start (docs/worker-protocol.md) and a real Worker end to end, over loopback gRPC."""

from __future__ import annotations

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
