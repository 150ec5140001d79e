"""A report's queue grant (a `worker:QUEUES` credential's queues): checked by the engine inside
the report's own transaction, under the task's lock. A report on a task of another queue, or a
run of local steps that strays into one, is refused with PermissionDenied and changes nothing;
on its own queue it is applied as any report."""

from __future__ import annotations

from dataclasses import replace

import pytest

from wiggle.compiler import load_flow
from wiggle.engine import (
    Engine,
    InstanceStatus,
    QueueGrant,
    Report,
    ReportKind,
    StepFailure,
    StepOutcome,
    TokenState,
)
from wiggle.errors import PermissionDenied, StaleLease

TWO = """
wiggle: 1
name: two
steps:
  - task: a
    queue: qa
  - task: b
    queue: qb
"""
HOLDER = "credential 'worker-a' (worker:qa)"
GRANT = QueueGrant(frozenset({"qa"}), HOLDER)


@pytest.fixture
def two(engine: Engine) -> Engine:
    engine.register(load_flow(TWO))
    return engine


def _leased(engine: Engine, queue: str):
    (task,) = engine.poll([queue], "w", 1)
    return task


def _state(engine: Engine, instance_id: str):
    view = engine.describe(instance_id, include_events=True)
    return view.status, view.tokens, view.events


def test_a_report_on_another_queues_task_is_refused_and_changes_nothing(two):
    started = two.start("two", {}).instance_id
    a = _leased(two, "qa")
    two.complete(a.task_id, a.lease, {"a": 1}, seq=1)
    b = _leased(two, "qb")
    before = _state(two, started)
    reports = [
        Report(ReportKind.COMPLETE, b.task_id, b.lease, 1, result={"forged": 1}),
        Report(ReportKind.FAIL, b.task_id, b.lease, 1, failure=StepFailure("forged")),
        Report(ReportKind.RELEASE, b.task_id, b.lease, 1),
        Report(ReportKind.ADVANCE, b.task_id, b.lease, 1, steps=(StepOutcome("b", context={}),)),
    ]
    for report in reports:
        with pytest.raises(PermissionDenied) as refused:
            two.report(replace(report, grant=GRANT))
        assert str(refused.value) == f"{HOLDER} may not report on a task of queue 'qb'"
    with pytest.raises(PermissionDenied):
        two.heartbeat(b.task_id, b.lease, grant=GRANT)
    assert _state(two, started) == before  # no event, the lease and its expiry as they were

    # Without the grant (or with one that covers qb) the same report is applied.
    both = QueueGrant(frozenset({"qa", "qb"}), "credential 'w' (worker:qa,qb)")
    assert two.heartbeat(b.task_id, b.lease, grant=both).instance_status is InstanceStatus.RUNNING
    done = two.report(replace(reports[0], grant=both))
    assert done.instance_status is InstanceStatus.COMPLETED


def test_in_a_batch_only_the_refused_report_is_refused(two):
    mine = two.start("two", {}).instance_id
    other = two.start("two", {}).instance_id
    a = _leased(two, "qa")
    a2 = _leased(two, "qa")
    two.complete(a2.task_id, a2.lease, {}, seq=1)  # the other instance moves on to qb
    b = _leased(two, "qb")
    assert {a.instance_id, b.instance_id} == {mine, other}
    answers = two.report_many(
        [
            Report(ReportKind.COMPLETE, b.task_id, b.lease, 1, result={}, grant=GRANT),
            Report(ReportKind.COMPLETE, a.task_id, a.lease, 1, result={"a": 1}, grant=GRANT),
        ]
    )
    assert isinstance(answers[0], PermissionDenied)
    assert answers[1].instance_status is InstanceStatus.RUNNING  # on to b, its own queue's task
    (left,) = [t for t in two.describe(b.instance_id).tokens if t.node_id == "b"]
    assert (left.state, left.attempt) == (TokenState.LEASED, 1)


def test_a_run_of_local_steps_may_not_stray_into_another_queue(two):
    started = two.start("two", {}).instance_id
    a = _leased(two, "qa")
    before = _state(two, started)
    steps = (StepOutcome("a", context={"a": 1}), StepOutcome("b", context={"b": 1}))
    report = Report(ReportKind.ADVANCE, a.task_id, a.lease, 1, steps=steps, grant=GRANT)
    with pytest.raises(PermissionDenied) as refused:
        two.report(report)
    assert str(refused.value) == f"{HOLDER} may not report a step of queue 'qb'"
    assert _state(two, started) == before
    # Its own queue's step alone is applied.
    own = replace(report, steps=steps[:1], final=True)
    assert two.report(own).instance_status is InstanceStatus.RUNNING
    assert _leased(two, "qb").node_id == "b"


def test_an_unknown_task_is_answered_alike_whoever_asks(two):
    with pytest.raises(StaleLease):
        two.report(Report(ReportKind.COMPLETE, "no-such-task", "x", 1, result={}, grant=GRANT))
    with pytest.raises(StaleLease):
        two.heartbeat("no-such-task", "x", grant=GRANT)
