"""Leases: fencing, heartbeats, redelivery after expiry, reports after the instance ended."""

from __future__ import annotations

import pytest
from engine_testkit import events_of

from wiggle.engine import InstanceStatus, StepFailure, StepOutcome, TokenState
from wiggle.errors import StaleLease

SHORT = """
wiggle: 1
name: short
steps:
  - task: slow
    timeout: 250ms
    retry: {max_attempts: %d, backoff: fixed, initial: 10ms}
  - task: after
"""


def wait_for(cond, engine, clock):
    """Move the virtual clock from one due timer or lease expiry to the next, ticking the
    leader, until `cond` holds; fail when nothing is left to fall due."""
    while True:
        engine.tick()
        got = cond()
        if got:
            return got
        due = engine.next_due_ms()
        if due is None:
            raise AssertionError("condition not reached, and nothing left to fall due")
        clock.advance(max(0, due + 1 - clock.now_ms()))


def test_an_expired_lease_is_redelivered_with_a_new_lease(make_driver, clock):
    d = make_driver({})
    d.deploy(SHORT % 3)
    r = d.engine.start("short", {"n": 1})
    (first,) = d.engine.poll(["default"], "w1", 5)
    assert first.attempt == 1 and first.timeout_ms == 250
    assert first.lease_expires_at_ms > 0
    second = wait_for(lambda: d.engine.poll(["default"], "w2", 5), d.engine, clock)[0]
    assert second.task_id == first.task_id
    assert second.attempt == 2
    assert second.lease != first.lease
    assert second.input == {"n": 1}
    with pytest.raises(StaleLease):  # the first worker woke up too late
        d.engine.complete(first.task_id, first.lease, {"stale": True})
    with pytest.raises(StaleLease):
        d.engine.heartbeat(first.task_id, first.lease)
    d.engine.complete(second.task_id, second.lease, {"n": 2})
    view = d.engine.describe(r.instance_id, include_events=True)
    assert [t.node_id for t in view.tokens if t.state is TokenState.READY] == ["after"]
    (expired,) = events_of(view, "lease_expired")
    assert expired.detail["worker"] == "w1"


def test_an_expired_last_attempt_fails_the_instance(make_driver, clock):
    d = make_driver({})
    d.deploy(SHORT % 1)
    r = d.engine.start("short", {})
    (task,) = d.engine.poll(["default"], "w1", 5)
    view = wait_for(
        lambda: (v := d.engine.describe(r.instance_id)).status is InstanceStatus.FAILED and v,
        d.engine,
        clock,
    )
    assert (
        view.reason
        == "step 'slow' failed after 1 attempt(s): lease expired: no report within 250 ms"
    )
    # The late worker learns the instance is over; nothing changes.
    assert d.engine.complete(task.task_id, task.lease, {}) is InstanceStatus.FAILED


def test_heartbeats_keep_the_lease(make_driver, clock):
    d = make_driver({})
    d.deploy((SHORT % 1).replace("250ms", "1s"))
    r = d.engine.start("short", {})
    (task,) = d.engine.poll(["default"], "w1", 5)
    expiry = task.lease_expires_at_ms
    for _ in range(10):  # three lease lengths, renewed every 300 ms
        clock.advance(300)
        d.engine.tick()
        hb = d.engine.heartbeat(task.task_id, task.lease)
        assert hb.instance_status is InstanceStatus.RUNNING
        assert hb.lease_expires_at_ms == clock.now_ms() + 1000 > expiry
        expiry = hb.lease_expires_at_ms
    d.engine.complete(task.task_id, task.lease, {"done": True})
    view = d.engine.describe(r.instance_id, include_events=True)
    assert events_of(view, "lease_expired") == []


def test_advance_run_renews_the_lease_and_keeps_the_token(make_driver):
    d = make_driver({})
    d.deploy(
        "wiggle: 1\nname: run\nsteps:\n  - task: a\n  - task: b\n    timeout: 5s\n  - task: c\n"
    )
    r = d.engine.start("run", {})
    (task,) = d.engine.poll(["default"], "w", 1)
    res = d.engine.advance_run(task.task_id, task.lease, [StepOutcome("a", context=1)], final=False)
    assert res.keep_going and res.instance_status is InstanceStatus.RUNNING
    assert res.lease_expires_at_ms > 0
    (tok,) = d.engine.describe(r.instance_id).tokens
    assert (tok.node_id, tok.state, tok.lease_owner) == ("b", TokenState.LEASED, "w")
    assert d.engine.poll(["default"], "other", 5) == []  # still held by w
    hb = d.engine.heartbeat(task.task_id, task.lease)  # the same lease covers the run
    assert hb.lease_expires_at_ms >= res.lease_expires_at_ms
    res = d.engine.advance_run(
        task.task_id,
        task.lease,
        [StepOutcome("b", context=2)],
        final=True,
        handback_reason="shutdown",
    )
    assert not res.keep_going
    view = d.engine.describe(r.instance_id, include_events=True)
    (tok,) = view.tokens
    assert (tok.node_id, tok.state) == ("c", TokenState.READY)
    assert [e.detail["reason"] for e in events_of(view, "handed_back")] == ["shutdown"]
    with pytest.raises(StaleLease):  # released: the lease is gone
        d.engine.advance_run(task.task_id, task.lease, [StepOutcome("c", context=3)], final=True)


def test_a_failure_inside_a_batch_applies_the_prefix_then_the_retry_policy(make_driver, clock):
    d = make_driver({})
    d.deploy(
        "wiggle: 1\nname: run\nsteps:\n  - task: a\n  - task: b\n"
        "    retry: {max_attempts: 2, backoff: fixed, initial: 10ms}\n  - task: c\n"
    )
    d.engine.start("run", {"v": 0})
    (task,) = d.engine.poll(["default"], "w", 1)
    batch = [StepOutcome("a", context={"v": 1}), StepOutcome("b", failure=StepFailure("nope"))]
    res = d.engine.advance_run(task.task_id, task.lease, batch, final=True)
    assert not res.keep_going and res.instance_status is InstanceStatus.RUNNING
    retry = wait_for(lambda: d.engine.poll(["default"], "w", 1), d.engine, clock)[0]
    assert (retry.node_id, retry.attempt, retry.input) == ("b", 2, {"v": 1})


def test_reports_on_a_cancelled_instance_answer_its_status(make_driver):
    d = make_driver({})
    d.deploy("wiggle: 1\nname: lin\nsteps:\n  - task: a\n  - task: b\n")
    r = d.engine.start("lin", {})
    (task,) = d.engine.poll(["default"], "w", 1)
    assert d.engine.cancel(r.instance_id, "operator") is InstanceStatus.CANCELLED
    hb = d.engine.heartbeat(task.task_id, task.lease)
    assert hb.instance_status is InstanceStatus.CANCELLED
    res = d.engine.advance_run(task.task_id, task.lease, [StepOutcome("a", context=1)], final=False)
    assert (res.instance_status, res.keep_going) == (InstanceStatus.CANCELLED, False)
    assert d.engine.complete(task.task_id, task.lease, {}) is InstanceStatus.CANCELLED
    view = d.engine.describe(r.instance_id)
    assert view.reason == "cancelled: operator"
    assert all(t.state is TokenState.DONE for t in view.tokens)


def test_eager_start_claims_the_first_task_in_the_same_transaction(make_driver):
    from wiggle.engine import EagerRequest

    d = make_driver({})
    d.deploy("wiggle: 1\nname: lin\nsteps:\n  - task: a\n    queue: q1\n  - task: b\n")
    miss = d.engine.start("lin", {"x": 1}, eager=EagerRequest("w", ["other"]))
    assert miss.eager_task is None
    r = d.engine.start("lin", {"x": 2}, eager=EagerRequest("w", ["q1"]))
    task = r.eager_task
    assert task is not None
    assert (task.node_id, task.queue, task.attempt, task.input) == ("a", "q1", 1, {"x": 2})
    assert task.execution_mode.value == "SERVER"
    polled = d.engine.poll(["q1"], "w2", 10)
    assert [p.instance_id for p in polled] == [miss.instance_id]  # the eager one is taken
    d.engine.complete(task.task_id, task.lease, {"x": 3})
    (b,) = d.engine.poll(["default"], "w", 1)
    assert b.input == {"x": 3}


FORK = """
wiggle: 1
name: fork
steps:
  - parallel:
      left:
        - task: x
        - task: x2
      right:
        - task: y
    combine: merge
  - for_each: /pages
    steps:
      - task: ocr
    combine: merge
"""


def test_a_branch_step_started_event_names_its_branch(make_driver):
    """Polled, handed over as a report's next task, or a for_each item: a branch's start
    event says which branch (the console's step history pairs starts and ends by it)."""
    from wiggle.engine import EagerRequest

    d = make_driver({})
    d.deploy(FORK)
    r = d.engine.start("fork", {"pages": ["p1", "p2"]})
    polled = {t.node_id: t for t in d.engine.poll(["default"], "w1", 5)}
    assert sorted(polled) == ["x", "y"]
    _, handed = d.engine.complete_and_next(
        polled["x"].task_id, polled["x"].lease, {}, EagerRequest("w2", ["default"])
    )
    assert handed is not None and handed.node_id == "x2"
    d.engine.complete(handed.task_id, handed.lease, {})
    d.engine.complete(polled["y"].task_id, polled["y"].lease, {"pages": ["p1", "p2"]})
    (combine,) = d.engine.poll(["default"], "w1", 5)
    d.engine.complete(combine.task_id, combine.lease, {"pages": ["p1", "p2"]})
    items = d.engine.poll(["default"], "w3", 5)
    assert [t.node_id for t in items] == ["ocr", "ocr"]
    view = d.engine.describe(r.instance_id, include_events=True)
    started = [
        (e.node_id, e.detail.get("branch"), e.detail["worker"])
        for e in events_of(view, "step_started")
    ]
    assert sorted(started, key=str) == sorted(
        [
            ("x", "left", "w1"),
            ("y", "right", "w1"),
            ("x2", "left", "w2"),
            ("parallel-1.join", None, "w1"),
            ("ocr", "0", "w3"),
            ("ocr", "1", "w3"),
        ],
        key=str,
    )
