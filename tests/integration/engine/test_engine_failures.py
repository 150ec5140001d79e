"""Failure paths: retries and backoff, non-retryable failures, bad predicates, bad requests."""

from __future__ import annotations

import pytest
from engine_testkit import MODES, Fail, events_of

from wiggle.engine import InstanceStatus, StepFailure, StepOutcome
from wiggle.errors import (
    DefinitionNotFound,
    InputRejected,
    InstanceNotFound,
    InstanceNotRunning,
    StaleLease,
    WrongPath,
)

RETRY = """
wiggle: 1
name: flaky
steps:
  - task: flaky
    retry: {max_attempts: 3, backoff: %s, initial: 50ms, max: 80ms}
  - task: after
"""


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backoff", ["fixed", "exponential"])
def test_retries_until_success_with_backoff_timers(make_driver, mode, backoff, clock):
    attempts: list[int] = []

    def flaky(c, task):
        attempts.append(task.attempt)
        if task.attempt < 3:
            raise Fail(f"boom {task.attempt}")
        return {"ok": task.attempt}

    d = make_driver({"flaky": flaky, "after": lambda c: c}, mode=mode)
    d.deploy(RETRY % backoff)
    view = d.run(d.engine.start("flaky", {}).instance_id)
    assert view.status is InstanceStatus.COMPLETED
    assert view.context == {"ok": 3}
    assert attempts == [1, 2, 3]
    delays = [e.detail["delay_ms"] for e in events_of(view, "step_retried")]
    assert delays == ([50, 50] if backoff == "fixed" else [50, 80])
    retried = [e.at_ms for e in view.events if e.kind in ("step_retried", "step_started")]
    # Each retry starts when its backoff ends on the virtual clock, not a moment earlier.
    assert [b - a for a, b in zip(retried[1::2], retried[2::2], strict=False)] == [
        d + 1 for d in delays
    ]
    assert len(events_of(view, "step_failed")) == 2


@pytest.mark.parametrize("mode", MODES)
def test_exhausted_retries_fail_the_instance_with_the_step_error(make_driver, mode, clock):
    def always(c):
        raise Fail("still broken")

    d = make_driver({"flaky": always, "after": lambda c: c}, mode=mode)
    d.deploy(RETRY % "fixed")
    view = d.run(d.engine.start("flaky", {}).instance_id)
    assert view.status is InstanceStatus.FAILED
    assert view.reason == "step 'flaky' failed after 3 attempt(s): still broken"
    assert "after" not in d.ran


@pytest.mark.parametrize("mode", MODES)
def test_non_retryable_failure_fails_at_once(make_driver, mode):
    def stolen(c):
        raise Fail("card reported stolen", non_retryable=True)

    d = make_driver({"flaky": stolen, "after": lambda c: c}, mode=mode)
    d.deploy(RETRY % "fixed")
    view = d.run(d.engine.start("flaky", {}).instance_id)
    assert view.status is InstanceStatus.FAILED
    assert view.reason == "step 'flaky' failed: card reported stolen"
    assert d.ran == ["flaky"]


@pytest.mark.parametrize("mode", MODES)
def test_a_predicate_returning_a_non_boolean_fails_clearly(make_driver, mode):
    d = make_driver({"p": lambda c: "yes", "x": lambda c: c}, mode=mode)
    d.deploy("wiggle: 1\nname: np\nsteps:\n  - filter: p\n  - task: x\n")
    view = d.run(d.engine.start("np", {}).instance_id)
    assert view.status is InstanceStatus.FAILED
    assert view.reason == "step 'p' failed: predicate 'p' returned a string, not a JSON boolean"
    assert d.ran == ["p"]


@pytest.mark.parametrize("mode", MODES)
def test_a_failing_combine_is_retried_with_its_input(make_driver, mode, clock):
    seen: list[object] = []

    def merge(i, task):
        seen.append(i)
        if task.attempt == 1:
            raise Fail("once")
        return i["results"]

    d = make_driver({"a": lambda c: 1, "b": lambda c: 2, "merge": merge}, mode=mode)
    d.deploy(
        "wiggle: 1\nname: cj\nsteps:\n  - parallel:\n      x: [{task: a}]\n      y: [{task: b}]\n"
        "    combine: merge\n    retry: {initial: 10ms}\n"
    )
    view = d.run(d.engine.start("cj", {"z": 0}).instance_id)
    assert view.context == {"x": 1, "y": 2}
    assert seen[0] == seen[1] == {"context": {"z": 0}, "results": {"x": 1, "y": 2}}


def test_unknown_instance_and_definition(engine):
    with pytest.raises(InstanceNotFound):
        engine.describe("nope")
    with pytest.raises(InstanceNotFound):
        engine.signal("nope", "s", None)
    with pytest.raises(InstanceNotFound):
        engine.cancel("nope")
    with pytest.raises(DefinitionNotFound):
        engine.start("no-such-flow", {})
    with pytest.raises(DefinitionNotFound):
        engine.get_definition("no-such-flow")


def test_start_pinned_to_an_unknown_version(make_driver):
    d = make_driver({})
    d.deploy("wiggle: 1\nname: lin\nsteps:\n  - task: a\n")
    with pytest.raises(DefinitionNotFound):
        d.engine.start("lin", {}, version="sha256:" + "0" * 64)
    assert d.engine.list_instances() == []


def test_input_schema_rejects_bad_input_without_starting(make_driver):
    d = make_driver({})
    d.deploy(
        "wiggle: 1\nname: typed\ninput:\n  type: object\n  required: [qty]\n"
        "  properties: {qty: {type: integer}}\nsteps:\n  - task: a\n"
    )
    with pytest.raises(InputRejected, match="qty"):
        d.engine.start("typed", {"qty": "three"})
    with pytest.raises(InputRejected, match="required"):
        d.engine.start("typed", {})
    assert d.engine.list_instances() == []
    assert d.engine.start("typed", {"qty": 3}).created


def test_signal_and_cancel_of_a_finished_instance(make_driver):
    d = make_driver({"a": lambda c: c})
    d.deploy("wiggle: 1\nname: lin\nsteps:\n  - task: a\n")
    r = d.engine.start("lin", {})
    d.run(r.instance_id)
    with pytest.raises(InstanceNotRunning):
        d.engine.signal(r.instance_id, "s", 1)
    with pytest.raises(InstanceNotRunning):
        d.engine.cancel(r.instance_id)
    assert d.engine.describe(r.instance_id).status is InstanceStatus.COMPLETED


def test_stale_and_unknown_leases_are_refused_and_change_nothing(make_driver):
    d = make_driver({})
    d.deploy("wiggle: 1\nname: lin\nsteps:\n  - task: a\n  - task: b\n")
    r = d.engine.start("lin", {"v": 1})
    (task,) = d.engine.poll(["default"], "w", 5)
    before = d.engine.describe(r.instance_id, include_events=True)
    for call in (
        lambda: d.engine.complete(task.task_id, "not-the-lease", {}),
        lambda: d.engine.fail(task.task_id, "not-the-lease", StepFailure("x")),
        lambda: d.engine.heartbeat(task.task_id, "not-the-lease"),
        lambda: d.engine.advance_run(task.task_id, "x", [], final=True),
        lambda: d.engine.complete("no-such-task", task.lease, {}),
    ):
        with pytest.raises(StaleLease):
            call()
    assert d.engine.describe(r.instance_id, include_events=True) == before
    d.engine.complete(task.task_id, task.lease, {"v": 2})
    with pytest.raises(StaleLease):  # the same report twice: the lease is spent
        d.engine.complete(task.task_id, task.lease, {"v": 3})


def test_wrong_path_is_refused_and_applies_nothing(make_driver):
    d = make_driver({})
    d.deploy("wiggle: 1\nname: lin\nsteps:\n  - task: a\n  - task: b\n  - sleep: 1s\n  - task: c\n")
    r = d.engine.start("lin", {})
    (task,) = d.engine.poll(["default"], "w", 5)
    before = d.engine.describe(r.instance_id, include_events=True)
    bad_batches = [
        [StepOutcome("b", context=1)],  # does not start at the leased node
        [StepOutcome("a", context=1), StepOutcome("c", context=2)],  # skips b
        [StepOutcome("a", context=1), StepOutcome("b", context=2), StepOutcome("c", context=3)],
        [StepOutcome("a", failure=StepFailure("x")), StepOutcome("b", context=2)],
        [StepOutcome("a", predicate=True)],  # a task step must carry a context
    ]
    for batch in bad_batches:
        with pytest.raises(WrongPath):
            d.engine.advance_run(task.task_id, task.lease, batch, final=True)
    assert d.engine.describe(r.instance_id, include_events=True) == before
    res = d.engine.advance_run(
        task.task_id,
        task.lease,
        [StepOutcome("a", context=1), StepOutcome("b", context=2)],
        final=False,
    )
    assert not res.keep_going  # b leads to a sleep: a boundary
    view = d.engine.describe(r.instance_id)
    assert [t.node_id for t in view.tokens] == ["sleep-1"]
