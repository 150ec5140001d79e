"""Several servers over one database cooperate: any server answers for any instance, a task
started through one is polled through another, and a long poll on one wakes for a start on the
other (LISTEN/NOTIFY on PostgreSQL; on SQLite the poll's own re-check finds it)."""

from __future__ import annotations

import threading
import time

from wiggle._proto.wiggle.v1 import wiggle_pb2 as pb
from wiggle.client import Client, InstanceStatus
from wiggle.engine import Engine


def test_two_servers_over_one_database(database_url, start_server, stub_for, flows):
    engines = [Engine(database_url), Engine(database_url)]
    try:
        a, b = (start_server(e) for e in engines)
        with Client(a.address) as on_a, Client(b.address) as on_b:
            on_a.deploy(flows["greet"])
            assert on_b.deploy(flows["greet"]).created is False
            stub_b = stub_for(b)
            # A long poll parked on B wakes when A starts an instance.
            threading.Timer(
                0.5, on_a.start, ("greet", {"name": "x"}), {"instance_id": "x1"}
            ).start()
            began = time.monotonic()
            poll = pb.PollTasksRequest(worker_id="wb", queues=["default"], wait_ms=20_000)
            (task,) = stub_b.PollTasks(poll, timeout=30).tasks
            assert time.monotonic() - began < 10
            assert task.instance_id == "x1"
            stub_a = stub_for(a)
            # Each task is claimed once across the cluster.
            assert (
                len(stub_a.PollTasks(pb.PollTasksRequest(worker_id="wa", queues=["default"])).tasks)
                == 0
            )
            stub_b.CompleteTask(
                pb.CompleteTaskRequest(task_id=task.task_id, lease=task.lease, result=b"{}")
            )
            (task,) = stub_a.PollTasks(
                pb.PollTasksRequest(worker_id="wa", queues=["default"], wait_ms=5_000)
            ).tasks
            stub_a.CompleteTask(
                pb.CompleteTaskRequest(task_id=task.task_id, lease=task.lease, result=b"7")
            )
            assert on_b.wait("x1", timeout=10).status is InstanceStatus.COMPLETED
            assert on_a.describe("x1").context == 7
    finally:
        for e in engines:
            e.close()
