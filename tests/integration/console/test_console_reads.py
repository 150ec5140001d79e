"""What the console reads from a real server (SQLite and PostgreSQL): an instance's last change,
the payloads of its signals, queues with their oldest READY task, where a version's instances
stand, and failures grouped alike. All of them are reads: nothing here writes but the flows."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from wiggle.server import EmbeddedStack, embedded_stack

GATE = b"""
wiggle: 1
name: gate
steps:
  - task: prepare
    queue: nobody
  - await: go
  - task: book
    queue: elsewhere
"""

CHARGE = b"""
wiggle: 1
name: charge
steps:
  - task: charge
"""


@pytest.fixture
def stack(database_url: str) -> Iterator[EmbeddedStack]:
    with embedded_stack(database_url) as st:
        st.client.deploy(GATE)
        st.client.deploy(CHARGE)
        yield st


def _clock_moves(past_ms: int) -> None:
    """Wait until the wall clock (the database's, on this machine) is past `past_ms`, so the
    next event is dated later than it."""
    while int(time.time() * 1000) <= past_ms + 1:
        time.sleep(0.001)


def test_updated_is_the_newest_event_in_describe_and_in_the_list(stack):
    client, engine = stack.client, stack.engine
    iid = client.start("gate", {}).instance_id
    created = client.describe(iid).created_at_ms
    _clock_moves(created)
    (task,) = engine.poll(["nobody"], "w1", 1)
    engine.complete(task.task_id, task.lease, {"ok": 1})
    view = client.describe(iid, events=True)
    newest = max(e.at_ms for e in view.events)
    assert newest > created
    assert view.updated_at_ms == newest
    (listed,) = [i for i in client.list_instances() if i.instance_id == iid]
    assert listed.updated_at_ms == newest


def test_a_received_signal_event_carries_its_payload(stack):
    client, engine = stack.client, stack.engine
    iid = client.start("gate", {}).instance_id
    client.signal(iid, "go", {"approved_by": "ops"})  # buffered: the await is not reached yet
    (task,) = engine.poll(["nobody"], "w1", 1)
    engine.complete(task.task_id, task.lease, {})
    events = client.describe(iid, events=True).events
    (received,) = [e for e in events if e.kind == "signal_received"]
    assert received.detail["payload"] == {"approved_by": "ops"}
    assert received.detail["buffered"] is True
    assert any(e.kind == "signal_consumed" and e.node_id == "go" for e in events)


def test_queues_count_ready_and_leased_tasks_with_the_oldest_ready_time(stack):
    client, engine = stack.client, stack.engine
    first = client.start("gate", {}).instance_id
    client.start("gate", {})
    client.start("charge", {})
    assert engine.poll(["default"], "w1", 1)  # the charge task: leased
    queues, now = client.list_queues()
    by_name = {q.queue: q for q in queues}
    assert set(by_name) == {"nobody", "default"}
    assert by_name["nobody"].ready == 2 and by_name["nobody"].leased == 0
    assert by_name["nobody"].oldest_ready_at_ms == client.describe(first).created_at_ms
    assert by_name["default"].ready == 0 and by_name["default"].leased == 1
    assert now >= by_name["nobody"].oldest_ready_at_ms
    workers, _ = client.list_workers()
    assert workers == []  # nobody polls `nobody`: the console says so beside it


def test_node_counts_say_where_a_versions_instances_stand_and_where_they_failed(stack):
    client, engine = stack.client, stack.engine
    for _ in range(3):
        client.start("gate", {})
    (task,) = engine.poll(["nobody"], "w1", 1)
    engine.complete(task.task_id, task.lease, {})  # one instance moves on to the await
    charged = [client.start("charge", {}).instance_id for _ in range(2)]
    for task in engine.poll(["default"], "w1", 2):
        engine.fail(task.task_id, task.lease, _non_retryable("card declined"))
    counts = {(c.node_id, c.state): c.instances for c in client.node_counts("gate")}
    assert counts == {("prepare", "READY"): 2, ("go", "AWAITING"): 1}
    counts = {(c.node_id, c.state): c.instances for c in client.node_counts("charge")}
    assert counts == {("charge", "FAILED"): 2}
    assert all(client.describe(i).status == "FAILED" for i in charged)


def test_incidents_group_failures_by_flow_node_and_reason_largest_first(stack):
    client, engine = stack.client, stack.engine
    ids = [client.start("charge", {}).instance_id for _ in range(3)]
    tasks = engine.poll(["default"], "w1", 3)
    messages = ["card declined", "card declined", "bank offline"]
    by_instance = {t.instance_id: t for t in tasks}
    for iid, message in zip(ids, messages, strict=True):
        task = by_instance[iid]
        engine.fail(task.task_id, task.lease, _non_retryable(message))
    page = client.list_incidents()
    assert page.failed == 3
    top, other = page.incidents
    assert (top.flow, top.node_id, top.instances) == ("charge", "charge", 2)
    assert top.reason == "step 'charge' failed: card declined"
    assert sorted(top.instance_ids) == sorted(ids[:2])
    assert top.first_failed_at_ms <= top.last_failed_at_ms
    assert (other.instances, other.instance_ids) == (1, [ids[2]])
    assert client.list_incidents(flow="gate").incidents == []


def _non_retryable(message: str):
    from wiggle.engine import StepFailure

    return StepFailure(message, non_retryable=True)


def test_describe_with_events_carries_each_top_level_nodes_last_input(stack):
    """The step history's "input it got last", and the reset picker's list of passed nodes."""
    client, engine = stack.client, stack.engine
    iid = client.start("gate", {"amount": 3}).instance_id
    (task,) = engine.poll(["nobody"], "w1", 1)
    engine.complete(task.task_id, task.lease, {"amount": 3, "prepared": True})
    view = client.describe(iid, events=True)
    assert set(view.step_inputs) == {"prepare", "go"}
    assert view.step_inputs["prepare"]["context"] == {"amount": 3}
    assert view.step_inputs["go"]["context"] == {"amount": 3, "prepared": True}
    assert view.step_inputs["go"]["at_ms"] >= view.step_inputs["prepare"]["at_ms"] > 0
    # Not read without the events (the list and plain describe stay as cheap as before).
    assert client.describe(iid).step_inputs == {}
    (listed,) = [i for i in client.list_instances() if i.instance_id == iid]
    assert listed.step_inputs == {}
