"""AdvanceRun's keep_going means "the server has no objection" (docs/worker-protocol.md, "Local
runs"): the server does not know the worker's queues, so a non-final AdvanceRun before a step on
a queue the worker may not serve still answers keep_going and keeps the token leased to that
lease at the next node. Whether to run that node is the worker's own classification."""

from __future__ import annotations

from wiggle._proto.wiggle.v1 import wiggle_pb2 as pb

TWO_QUEUES = b"""
wiggle: 1
name: two-queues
execution: LOCAL_SYNC
steps:
  - task: here
  - {task: there, queue: elsewhere}
"""


def test_keep_going_says_nothing_about_the_next_steps_queue(client, stub):
    client.deploy(TWO_QUEUES)
    iid = client.start("two-queues", {}).instance_id
    (task,) = stub.PollTasks(
        pb.PollTasksRequest(worker_id="w1", queues=["default"], max_tasks=1, wait_ms=5_000)
    ).tasks
    reply = stub.AdvanceRun(
        pb.AdvanceRunRequest(
            task_id=task.task_id,
            lease=task.lease,
            steps=[pb.StepResult(node_id="here", context=b"{}")],
            final=False,
            seq=1,
        )
    )
    assert reply.keep_going and reply.instance_status == pb.RUNNING
    assert reply.lease_expires_at_ms > 0 and reply.server_now_ms > 0
    [token] = [t for t in client.describe(iid).tokens if t.state == "LEASED"]
    assert token.node_id == "there" and token.lease_owner == "w1"
    # A worker serving `elsewhere` is not handed the step: the lease is still the first one's.
    other = stub.PollTasks(
        pb.PollTasksRequest(worker_id="w2", queues=["elsewhere"], max_tasks=1, wait_ms=0)
    )
    assert not other.tasks
    # The first worker, which does not serve `elsewhere`, hands back with other_queue: the step
    # becomes READY on its queue for a worker that serves it.
    done = stub.AdvanceRun(
        pb.AdvanceRunRequest(
            task_id=task.task_id,
            lease=task.lease,
            steps=[],
            final=True,
            handback_reason="other_queue",
            seq=2,
        )
    )
    assert not done.keep_going
    (there,) = stub.PollTasks(
        pb.PollTasksRequest(worker_id="w2", queues=["elsewhere"], max_tasks=1, wait_ms=5_000)
    ).tasks
    assert there.node_id == "there"
