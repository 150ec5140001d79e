"""Report identity: a report resent after a lost response is answered again, never applied
twice; ReleaseTask gives a task back without costing an attempt; claims respect activities."""

from __future__ import annotations

import pytest
from engine_testkit import events_of

from wiggle.engine import EagerRequest, InstanceStatus, StepOutcome, TokenState
from wiggle.errors import ReportOutOfOrder, StaleLease

LOOP = """
wiggle: 1
name: counter
execution: LOCAL_ASYNC
steps:
  - loop:
      steps:
        - task: inc
      while: more
      max_iterations: 5
"""

LINEAR = """
wiggle: 1
name: linear
steps:
  - task: a
  - task: b
"""


def _loop_batch(node_ids, ctx):
    return [StepOutcome(node_ids[0], context=ctx), StepOutcome(node_ids[1], predicate=True)]


def test_a_resent_loop_batch_is_answered_again_not_applied_twice(make_driver):
    """Defect: a batch that ends where it started ([inc, more=true]) left lease and node as they
    were, so the same AdvanceRun sent twice was applied twice (the loop advanced by 2)."""
    d = make_driver({})
    flow = d.deploy(LOOP)
    inc, more = (n.id for n in flow.graph.nodes.values() if n.kind in ("task", "predicate"))
    r = d.engine.start("counter", {"n": 0})
    (task,) = d.engine.poll(["default"], "w", 1)
    batch = _loop_batch((inc, more), {"n": 1})
    first = d.engine.advance_run(task.task_id, task.lease, batch, final=False, seq=1)
    again = d.engine.advance_run(task.task_id, task.lease, batch, final=False, seq=1)
    assert first.keep_going and again.keep_going
    assert again.duplicate and not first.duplicate
    assert again.lease_expires_at_ms == first.lease_expires_at_ms
    view = d.engine.describe(r.instance_id, include_events=True)
    assert len(events_of(view, "step_completed")) == 2  # inc, more: once each
    (token,) = [t for t in view.tokens if t.state is TokenState.LEASED]
    assert token.node_id == inc
    # The next report is 2; a report that skips one is refused, not applied.
    with pytest.raises(ReportOutOfOrder):
        d.engine.advance_run(task.task_id, task.lease, batch, final=False, seq=3)
    d.engine.advance_run(
        task.task_id,
        task.lease,
        [StepOutcome(inc, context={"n": 2}), StepOutcome(more, predicate=False)],
        final=True,
        seq=2,
    )
    assert d.engine.describe(r.instance_id).status is InstanceStatus.COMPLETED
    assert d.engine.describe(r.instance_id).context == {"n": 2}


def test_a_resent_final_report_is_answered_after_the_token_moved_on(make_driver):
    d = make_driver({})
    d.deploy(LINEAR)
    r = d.engine.start("linear", {})
    (a,) = d.engine.poll(["default"], "w", 1)
    assert d.engine.complete(a.task_id, a.lease, {"a": 1}, seq=1) is InstanceStatus.RUNNING
    # The token is READY at b now; the resend is recognised by the lease it released.
    assert d.engine.complete(a.task_id, a.lease, {"a": 1}, seq=1) is InstanceStatus.RUNNING
    (b,) = d.engine.poll(["default"], "w", 1)
    assert b.node_id == "b" and b.attempt == 1
    # Even after the token was leased again, the old lease's resend is answered, not applied.
    assert d.engine.complete(a.task_id, a.lease, {"a": 1}, seq=1) is InstanceStatus.RUNNING
    d.engine.complete(b.task_id, b.lease, {"b": 1}, seq=1)
    view = d.engine.describe(r.instance_id, include_events=True)
    assert view.status is InstanceStatus.COMPLETED and view.context == {"b": 1}
    assert [e.node_id for e in events_of(view, "step_completed")] == ["a", "b"]
    # Without an identity (seq 0) a resend is refused as before.
    with pytest.raises(StaleLease):
        d.engine.complete(a.task_id, a.lease, {"a": 1})


def test_a_resent_complete_with_next_gets_the_same_next_task(make_driver):
    d = make_driver({})
    d.deploy(LINEAR)
    r = d.engine.start("linear", {})
    (a,) = d.engine.poll(["default"], "w", 1)
    me = EagerRequest("w", ("default",))
    status, first = d.engine.complete_and_next(a.task_id, a.lease, {"a": 1}, me, seq=1)
    assert status is InstanceStatus.RUNNING and first is not None and first.node_id == "b"
    status, again = d.engine.complete_and_next(a.task_id, a.lease, {"a": 1}, me, seq=1)
    assert again is not None
    assert (again.task_id, again.lease, again.node_id) == (first.task_id, first.lease, "b")
    d.engine.complete(first.task_id, first.lease, {"b": 1}, seq=1)
    # The token remembers only the lease its last final report released (now b's): a resend
    # older than that is refused as stale, and still never applied.
    with pytest.raises(StaleLease):
        d.engine.complete_and_next(a.task_id, a.lease, {"a": 1}, me, seq=1)
    view = d.engine.describe(r.instance_id, include_events=True)
    assert [e.node_id for e in events_of(view, "step_completed")] == ["a", "b"]


def test_release_gives_the_task_back_without_costing_an_attempt(make_driver):
    d = make_driver({})
    d.deploy(
        "wiggle: 1\nname: once\nsteps:\n  - task: a\n    retry: {max_attempts: 1}\n  - task: b\n"
    )
    r = d.engine.start("once", {"x": 1})
    (a,) = d.engine.poll(["default"], "w1", 1)
    assert d.engine.release(a.task_id, a.lease, seq=1, reason="shutdown") is InstanceStatus.RUNNING
    assert d.engine.release(a.task_id, a.lease, seq=1, reason="shutdown") is InstanceStatus.RUNNING
    (again,) = d.engine.poll(["default"], "w2", 1)
    assert (again.node_id, again.attempt, again.input) == ("a", 1, {"x": 1})
    view = d.engine.describe(r.instance_id, include_events=True)
    (handed,) = events_of(view, "handed_back")
    assert handed.detail["reason"] == "shutdown"
    assert not events_of(view, "step_failed")


def test_claims_lease_only_tasks_whose_activity_the_worker_has(make_driver):
    d = make_driver({})
    d.deploy(LINEAR)
    d.engine.start("linear", {})
    assert d.engine.poll(["default"], "w", 5, activities=("b", "c")) == []
    (a,) = d.engine.poll(["default"], "w", 5, activities=("a",))
    assert a.activity == "a"
    only_a = EagerRequest("w", ("default",), ("a",))
    _, nxt = d.engine.complete_and_next(a.task_id, a.lease, {}, only_a, seq=1)
    assert nxt is None  # b is not an activity this worker has
    (b,) = d.engine.poll(["default"], "w2", 5)  # a worker that says nothing takes any
    assert b.activity == "b"


def test_a_heartbeat_naming_the_running_step_renews_by_its_timeout(make_driver):
    d = make_driver({})
    d.deploy(
        "wiggle: 1\nname: hb\nexecution: LOCAL_SYNC\nsteps:\n"
        "  - task: quick\n    timeout: 1s\n  - task: slow\n    timeout: 10m\n"
    )
    d.engine.start("hb", {})
    (task,) = d.engine.poll(["default"], "w", 1)
    plain = d.engine.heartbeat(task.task_id, task.lease)
    assert plain.lease_expires_at_ms - plain.server_now_ms == 1000
    slow = d.engine.heartbeat(task.task_id, task.lease, node_id="slow")
    assert slow.lease_expires_at_ms - slow.server_now_ms == 600_000
    # A node that is not a worker step of the graph is ignored: the token's own timeout.
    bogus = d.engine.heartbeat(task.task_id, task.lease, node_id="no-such-node")
    assert bogus.lease_expires_at_ms - bogus.server_now_ms == 1000
