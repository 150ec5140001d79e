"""Cancellation in every state: tokens, timers, leases, signals, children all stop."""

from __future__ import annotations

import time

import pytest
from engine_testkit import events_of

from wiggle.engine import InstanceStatus, StepFailure, TokenState

FLOW = """
wiggle: 1
name: many
steps:
  - choice:
      - when: to_ready
        steps: [{task: work}]
      - when: to_sleep
        steps: [{sleep: 1h}]
      - when: to_await
        steps: [{await: go, timeout: 1h}]
      - when: to_retry
        steps:
          - task: flaky
            retry: {max_attempts: 5, backoff: fixed, initial: 1h}
      - when: to_fork
        steps:
          - parallel:
              one: [{task: work, id: work2}]
              two: [{sleep: 1h}]
            combine: merge
      - when: to_each
        steps:
          - for_each: /xs
            max_concurrency: 1
            steps: [{task: work, id: work3}]
            combine: merge2
    otherwise:
      - subflow: child
  - task: after
"""
CHILD = "wiggle: 1\nname: child\nsteps:\n  - sleep: 1h\n"


def _setup(make_driver, target: str):
    preds = ["to_ready", "to_sleep", "to_await", "to_retry", "to_fork", "to_each"]
    handlers = {p: (lambda c, p=p: c["target"] == p) for p in preds}
    d = make_driver(handlers)
    d.deploy(CHILD)
    d.deploy(FLOW)
    return d, d.engine.start("many", {"target": target, "xs": [1, 2, 3]})


def _drive_predicates(d, instance_id):
    """Run predicates only (the tokens must stay where the choice sends them)."""
    for _ in range(20):
        for t in d.engine.poll(["default"], "w", 10):
            if t.activity in d.handlers:
                d.engine.complete(t.task_id, t.lease, d.handlers[t.activity](t.input))
            elif t.activity == "flaky":
                d.engine.fail(t.task_id, t.lease, StepFailure("again"))
            else:
                return t  # leave a worker task LEASED
        time.sleep(0.01)
    return None


@pytest.mark.parametrize(
    "target,expected",
    [
        ("to_ready", {TokenState.READY}),
        ("to_sleep", {TokenState.WAITING}),
        ("to_await", {TokenState.AWAITING}),
        ("to_retry", {TokenState.WAITING}),
        ("to_fork", {TokenState.JOINED, TokenState.READY, TokenState.WAITING}),
        ("to_each", {TokenState.JOINED, TokenState.READY, TokenState.WAITING}),
        ("to_child", {TokenState.WAITING}),
    ],
)
def test_cancel_in_every_state(make_driver, target, expected):
    d, r = _setup(make_driver, target)
    leased = None
    if target in ("to_ready", "to_fork", "to_each"):
        # Leave one task READY: run only the choice predicates.
        for _ in range(20):
            for t in d.engine.poll(["default"], "w", 10):
                if t.activity in d.handlers:
                    d.engine.complete(t.task_id, t.lease, d.handlers[t.activity](t.input))
                else:
                    leased = t
            if leased:
                break
        assert leased is not None
        # Put it back to READY through a handback, so READY is what we cancel.
        d.engine.advance_run(leased.task_id, leased.lease, [], final=True)
    else:
        _drive_predicates(d, r.instance_id)
    before = d.engine.describe(r.instance_id)
    assert {t.state for t in before.tokens if t.state is not TokenState.DONE} == expected
    child_id = None
    if target == "to_child":
        child_id = events_of(
            d.engine.describe(r.instance_id, include_events=True), "child_started"
        )[0].detail["child_instance_id"]
    assert d.engine.cancel(r.instance_id, "stop") is InstanceStatus.CANCELLED
    assert d.engine.cancel(r.instance_id) is InstanceStatus.CANCELLED  # idempotent
    after = d.engine.describe(r.instance_id)
    assert after.status is InstanceStatus.CANCELLED
    assert after.reason == "cancelled: stop"
    assert {t.state for t in after.tokens} == {TokenState.DONE}
    assert d.engine.poll(["default"], "w", 10) == []
    if child_id is not None:
        child = d.engine.describe(child_id)
        assert child.status is InstanceStatus.CANCELLED
        assert {t.state for t in child.tokens} == {TokenState.DONE}
    d.engine.tick()
    assert d.engine.next_wakeup_s() == d.engine.leader_ttl_s / 3  # no timers left


def test_cancel_a_leased_task(make_driver):
    d, r = _setup(make_driver, "to_ready")
    leased = None
    for _ in range(20):
        for t in d.engine.poll(["default"], "w", 10):
            if t.activity in d.handlers:
                d.engine.complete(t.task_id, t.lease, d.handlers[t.activity](t.input))
            else:
                leased = t
        if leased:
            break
    assert leased is not None
    assert d.engine.cancel(r.instance_id) is InstanceStatus.CANCELLED
    assert d.engine.complete(leased.task_id, leased.lease, {}) is InstanceStatus.CANCELLED
    assert d.engine.describe(r.instance_id).reason == "cancelled"


def test_cancelling_a_child_fails_its_parent(make_driver):
    d, r = _setup(make_driver, "to_child")
    _drive_predicates(d, r.instance_id)
    view = d.engine.describe(r.instance_id, include_events=True)
    child_id = events_of(view, "child_started")[0].detail["child_instance_id"]
    d.engine.cancel(child_id, "no longer needed")
    parent = d.engine.describe(r.instance_id)
    assert parent.status is InstanceStatus.FAILED
    assert child_id in parent.reason and "CANCELLED" in parent.reason
