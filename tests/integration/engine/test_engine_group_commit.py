"""Group commit: reports applied together in one transaction each get their own answer; a
refused report spoils nothing for the others; reports on one instance see each other."""

from __future__ import annotations

import threading

from engine_testkit import events_of

from wiggle.engine import InstanceStatus, Report, ReportKind, StepFailure, StepOutcome
from wiggle.errors import StaleLease, WrongPath

LINEAR = "wiggle: 1\nname: lin\nsteps:\n  - task: a\n  - task: b\n"
FORK = """
wiggle: 1
name: fork
steps:
  - parallel:
      left: [{task: l}]
      right: [{task: r}]
    combine: merge
"""


def test_a_batch_answers_each_report_and_refuses_the_bad_ones_alone(make_driver):
    d = make_driver({})
    d.deploy(LINEAR)
    ids = [d.engine.start("lin", {"i": i}).instance_id for i in range(4)]
    tasks = sorted(d.engine.poll(["default"], "w", 10), key=lambda t: ids.index(t.instance_id))
    assert len(tasks) == 4
    t0, t1, t2, t3 = tasks
    answers = d.engine.report_many(
        [
            Report(ReportKind.COMPLETE, t0.task_id, t0.lease, 1, result={"done": 0}),
            Report(ReportKind.COMPLETE, t1.task_id, "not-the-lease", 1, result={"x": 1}),
            Report(
                ReportKind.ADVANCE,
                t2.task_id,
                t2.lease,
                1,
                steps=(StepOutcome("b", context={}),),
                final=True,
            ),
            Report(ReportKind.FAIL, t3.task_id, t3.lease, 1, failure=StepFailure("boom")),
        ]
    )
    assert answers[0].instance_status is InstanceStatus.RUNNING
    assert isinstance(answers[1], StaleLease)
    assert isinstance(answers[2], WrongPath)
    assert answers[3].instance_status is InstanceStatus.RUNNING
    views = [d.engine.describe(i, include_events=True) for i in ids]
    assert [t.node_id for t in views[0].tokens] == ["b"]  # moved on
    assert [t.node_id for t in views[1].tokens] == ["a"]  # untouched by the refused reports
    assert [t.node_id for t in views[2].tokens] == ["a"]
    assert not events_of(views[1], "step_completed") and not events_of(views[2], "step_completed")
    assert [e.node_id for e in events_of(views[3], "step_failed")] == ["a"]


def test_branches_of_one_instance_reported_in_one_batch_join_correctly(make_driver):
    d = make_driver({})
    d.deploy(FORK)
    r = d.engine.start("fork", {"n": 1})
    left, right = sorted(d.engine.poll(["default"], "w", 10), key=lambda t: t.node_id)
    answers = d.engine.report_many(
        [
            Report(ReportKind.COMPLETE, left.task_id, left.lease, 1, result={"l": 1}),
            Report(ReportKind.COMPLETE, right.task_id, right.lease, 1, result={"r": 1}),
            Report(ReportKind.COMPLETE, right.task_id, right.lease, 1, result={"r": 1}),  # resent
        ]
    )
    assert [a.duplicate for a in answers] == [False, False, True]
    (combine,) = d.engine.poll(["default"], "w", 10)
    assert combine.input["results"] == {"left": {"l": 1}, "right": {"r": 1}}
    d.engine.complete(combine.task_id, combine.lease, {"merged": True})
    assert d.engine.describe(r.instance_id).status is InstanceStatus.COMPLETED


def test_concurrent_reports_share_transactions(make_driver):
    d = make_driver({})
    d.deploy(LINEAR)
    n = 48
    for i in range(n):
        d.engine.start("lin", {"i": i})
    tasks = []
    while len(tasks) < n:
        tasks += d.engine.poll(["default"], "w", n)
    group = d.engine._reports
    before = (group.batches, group.items)
    go = threading.Barrier(n)
    errors: list[BaseException] = []

    def report(task):
        go.wait(10)
        try:
            d.engine.complete(task.task_id, task.lease, {"ok": True}, seq=1)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=report, args=(t,)) for t in tasks]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    batches, items = group.batches - before[0], group.items - before[1]
    assert items == n
    assert batches < n  # some reports shared a transaction
    assert len(d.engine.poll(["default"], "w", 2 * n)) == n  # every one moved on to b
