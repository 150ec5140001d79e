"""The operator's RPCs over a real server (SQLite and PostgreSQL): ListInstances, DescribeInstance
with contexts and explanations, ListWorkers, ListDefinitions and WaitInstance."""

from __future__ import annotations

import threading
import time

import orjson
import pytest

from wiggle._proto.wiggle.v1 import wiggle_pb2 as pb

SCORE = b"""
wiggle: 1
name: approval
steps:
  - task: score
  - await: approve
    timeout: 1h
    on_timeout:
      - task: escalate
  - task: book
"""

LOANS = b"""
wiggle: 1
name: loans
queue: loans
steps:
  - task: validate
"""


def _poll(stub, queues=("default",), worker="w1", activities=(), wait_ms=0):
    request = pb.PollTasksRequest(
        worker_id=worker,
        queues=list(queues),
        max_tasks=10,
        wait_ms=wait_ms,
        activities=list(activities),
        slots=4,
        sdk="wiggle-test/1",
    )
    return list(stub.PollTasks(request, timeout=30).tasks)


def test_list_filters_pages_newest_first_and_counts(client):
    client.deploy(SCORE)
    client.deploy(LOANS)
    ids = []
    for n in range(5):
        ids.append(client.start("approval", {"n": n}, instance_id=f"ap-{n}").instance_id)
        time.sleep(0.002)  # distinct creation instants, so newest-first is well defined
    client.start("loans", {}, instance_id="loan-1")
    client.cancel("ap-1")

    first = client.list_instances(flow="approval", limit=2, counts=True)
    assert [i.instance_id for i in first] == ["ap-4", "ap-3"]
    assert first.counts == {"RUNNING": 4, "COMPLETED": 0, "FAILED": 0, "CANCELLED": 1}
    second = client.list_instances(flow="approval", limit=2, page_token=first.next_page_token)
    third = client.list_instances(flow="approval", limit=2, page_token=second.next_page_token)
    assert [i.instance_id for i in [*second, *third]] == ["ap-2", "ap-1", "ap-0"]
    assert third.next_page_token == ""

    cancelled = client.list_instances(status="CANCELLED", counts=True)
    assert [i.instance_id for i in cancelled] == ["ap-1"]
    assert cancelled.counts["RUNNING"] == 5  # counts ignore the status filter
    assert [i.instance_id for i in client.list_instances(id_contains="loan")] == ["loan-1"]
    assert [i.instance_id for i in client.list_instances(id_contains="%")] == []
    version = client.get_definition("loans").version
    assert [i.instance_id for i in client.list_instances(version=version)] == ["loan-1"]
    newest = client.list_instances(limit=1)[0]
    assert client.list_instances(started_after_ms=newest.created_at_ms)[0].instance_id == "loan-1"
    older = client.list_instances(started_before_ms=newest.created_at_ms)
    assert "loan-1" not in {i.instance_id for i in older}


def test_a_bad_page_token_is_invalid_argument(client):
    from wiggle import errors

    with pytest.raises(errors.InvalidRequest, match="page token"):
        client.list_instances(page_token="not-a-token")


def test_describe_shows_the_current_context_and_why_it_waits(client, stub):
    """The approver's story: the context shown is the one the earlier steps produced, not the
    start input, and the waiting token says which signal it waits for and until when."""
    client.deploy(SCORE)
    iid = client.start("approval", {"applicant": "ada"}).instance_id
    (task,) = _poll(stub)
    stub.CompleteTask(
        pb.CompleteTaskRequest(
            task_id=task.task_id, lease=task.lease, result=b'{"applicant": "ada", "score": 7}'
        )
    )
    view = client.describe(iid)
    assert view.context == {"applicant": "ada", "score": 7}
    assert view.input == {"applicant": "ada"}
    assert view.current_node == "approve"
    (live,) = [t for t in view.tokens if t.state != "DONE"]
    assert live.context == {"applicant": "ada", "score": 7}
    assert live.explanation.startswith("waiting for signal `approve` since ")
    assert "then the on_timeout steps" in live.explanation

    raw = stub.DescribeInstance(pb.DescribeInstanceRequest(instance_id=iid))
    assert raw.tokens[0].explanation == live.explanation
    assert orjson.loads(raw.context) == {"applicant": "ada", "score": 7}


def test_ready_explains_missing_workers_and_missing_activities(client, stub):
    """A worker started without `--queue loans`, then one on `loans` without `validate`."""
    client.deploy(LOANS)
    _poll(stub, queues=["default"], worker="plain", activities=["other"])
    iid = client.start("loans", {}).instance_id
    (token,) = client.describe(iid).tokens
    assert "READY on queue `loans` since " in token.explanation
    assert "no worker has polled `loans` in the last 30 s" in token.explanation

    # This worker polls `loans` (before the task exists, so it cannot take it) but lacks the
    # step's activity.
    client.cancel(iid)
    assert _poll(stub, queues=["loans"], worker="loans-w", activities=["other"]) == []
    iid = client.start("loans", {}).instance_id
    (token,) = client.describe(iid).tokens
    assert "the workers polling `loans` do not have activity `validate` (loans-w)" in (
        token.explanation
    )


def test_list_workers_after_polls(client, stub):
    _poll(stub, queues=["a", "b"], worker="w-a", activities=["x", "y"])
    _poll(stub, queues=["c"], worker="w-c")
    workers, now = client.list_workers()
    by_id = {w.worker_id: w for w in workers}
    assert set(by_id) == {"w-a", "w-c"}
    assert by_id["w-a"].queues == ["a", "b"] and by_id["w-a"].activities == ["x", "y"]
    assert by_id["w-a"].slots == 4 and by_id["w-a"].sdk == "wiggle-test/1"
    assert by_id["w-c"].activities == []
    assert 0 <= now - by_id["w-a"].last_poll_ms < 60_000
    assert by_id["w-a"].first_seen_ms <= by_id["w-a"].last_poll_ms


def test_list_definitions_with_counts(client):
    client.deploy(LOANS)
    changed = LOANS.replace(b"task: validate", b"task: check")
    client.deploy(changed)
    client.start("loans", {})
    defs = client.list_definitions(counts=True)
    assert [d.name for d in defs] == ["loans", "loans"]
    newest, oldest = defs
    assert newest.version == client.get_definition("loans").version
    assert newest.instance_counts["RUNNING"] == 1 and oldest.instance_counts["RUNNING"] == 0
    assert newest.execution_mode == "DEFAULT"
    assert client.list_definitions("nope") == []
    assert client.list_definitions("loans")[0].instance_counts == {}


def test_wait_answers_when_the_instance_ends(client, stub):
    client.deploy(LOANS)
    iid = client.start("loans", {"x": 1}).instance_id
    (task,) = _poll(stub, queues=["loans"])
    result: list = []
    waiter = threading.Thread(target=lambda: result.append(client.wait(iid, timeout=60)))
    waiter.start()
    stub.CompleteTask(
        pb.CompleteTaskRequest(task_id=task.task_id, lease=task.lease, result=b'{"done": true}')
    )
    waiter.join(30)
    assert not waiter.is_alive()
    assert result[0].status == "COMPLETED" and result[0].context == {"done": True}


def test_wait_returns_the_running_instance_after_wait_ms(client, stub):
    client.deploy(LOANS)
    iid = client.start("loans", {}).instance_id
    msg = stub.WaitInstance(pb.WaitInstanceRequest(instance_id=iid, wait_ms=50), timeout=10)
    assert msg.status == pb.RUNNING
    with pytest.raises(TimeoutError):
        client.wait(iid, timeout=0.1)
