"""Repair: retry a failed instance where it failed, reset an instance to a node it passed."""

from __future__ import annotations

import pytest
from engine_testkit import MODES, Fail, events_of

from wiggle.compiler import load_flow
from wiggle.engine import InstanceStatus, StepFailure, StepOutcome, TokenState
from wiggle.errors import InvalidRequest, RepairRefused, StaleLease

LINEAR = """
wiggle: 1
name: lin
steps:
  - task: a
  - task: b
    retry: {max_attempts: 2, backoff: fixed, initial: 10ms}
  - task: c
"""


def _broken_then_fixed():
    """A handler that fails until `fixed[0]` is set."""
    fixed = [False]

    def b(ctx):
        if not fixed[0]:
            raise Fail("b is broken", non_retryable=True)
        return {**ctx, "b": True}

    return fixed, b


@pytest.mark.parametrize("mode", MODES)
def test_retry_runs_the_failed_step_again_with_its_context_and_a_fresh_attempt(make_driver, mode):
    fixed, b = _broken_then_fixed()
    seen: list[dict] = []

    def b_seen(ctx, task):
        seen.append({"ctx": ctx, "attempt": task.attempt})
        return b(ctx)

    d = make_driver(
        {"a": lambda c: {**c, "a": 1}, "b": b_seen, "c": lambda c: {**c, "c": 1}}, mode=mode
    )
    d.deploy(LINEAR)
    iid = d.engine.start("lin", {"x": 1}).instance_id
    failed = d.run(iid)
    assert failed.status is InstanceStatus.FAILED
    fixed[0] = True
    result = d.engine.retry(iid, by="ops")
    assert result.instances == [iid] and result.nodes == ["b"]
    assert d.engine.describe(iid).status is InstanceStatus.RUNNING
    done = d.run(iid)
    assert done.status is InstanceStatus.COMPLETED
    assert done.context == {"x": 1, "a": 1, "b": True, "c": 1}
    assert d.ran.count("a") == 1  # what completed before the failure does not run again
    assert seen == [
        {"ctx": {"x": 1, "a": 1}, "attempt": 1},
        {"ctx": {"x": 1, "a": 1}, "attempt": 1},
    ]
    (retried,) = events_of(done, "instance_retried")
    assert retried.detail == {"nodes": ["b"], "by": "ops"}
    assert [e.attempt for e in events_of(done, "step_failed")] == [1]  # history kept


@pytest.mark.parametrize("status", ["RUNNING", "COMPLETED", "CANCELLED"])
def test_retry_refuses_an_instance_that_did_not_fail(make_driver, status):
    d = make_driver({"a": lambda c: c, "b": lambda c: c, "c": lambda c: c})
    d.deploy(LINEAR)
    iid = d.engine.start("lin", {}).instance_id
    if status == "COMPLETED":
        d.run(iid)
    elif status == "CANCELLED":
        d.engine.cancel(iid)
    with pytest.raises(RepairRefused, match=f"is {status}; only a FAILED instance"):
        d.engine.retry(iid)
    assert d.engine.describe(iid).status.value == status


PARALLEL = """
wiggle: 1
name: par
steps:
  - parallel:
      left:
        - task: l1
        - task: l2
      right:
        - task: r1
          queue: slow
    combine: merge
  - task: after
"""


@pytest.mark.parametrize("mode", MODES)
def test_retry_of_a_parallel_failure_runs_only_the_failed_branch(make_driver, mode):
    fixed = [False]

    def r1(ctx):
        if not fixed[0]:
            raise Fail("right is down", non_retryable=True)
        return {"right": True}

    def merge(inp):
        return {"results": inp["results"]}

    d = make_driver(
        {
            "l1": lambda c: {"l1": True},
            "l2": lambda c: {**c, "l2": True},
            "r1": r1,
            "merge": merge,
            "after": lambda c: c,
        },
        mode=mode,
    )
    d.deploy(PARALLEL)
    iid = d.engine.start("par", {}).instance_id
    # The left branch finishes (no worker serves `slow` yet); then the right one fails.
    d.run(iid, until=lambda v: any(t.node_id == "parallel-1.join" for t in v.tokens))
    d.queues = ("default", "slow")
    assert d.run(iid).status is InstanceStatus.FAILED
    ran_before = list(d.ran)
    fixed[0] = True
    d.engine.retry(iid)
    done = d.run(iid)
    assert done.status is InstanceStatus.COMPLETED
    assert done.context == {"results": {"left": {"l1": True, "l2": True}, "right": {"right": True}}}
    after_retry = d.ran[len(ran_before) :]
    assert "l1" not in after_retry and "l2" not in after_retry
    assert after_retry[0] == "r1"


FOREACH = """
wiggle: 1
name: each
steps:
  - for_each: /items
    max_concurrency: 2
    steps:
      - task: work
    combine: gather
"""


@pytest.mark.parametrize("mode", MODES)
def test_retry_of_a_for_each_keeps_finished_elements(make_driver, mode):
    fixed = [False]
    calls: list[int] = []

    def work(n):
        calls.append(n)
        if n == 2 and not fixed[0]:
            raise Fail("two is bad", non_retryable=True)
        return n * 10

    d = make_driver({"work": work, "gather": lambda inp: inp["results"]}, mode=mode)
    d.deploy(FOREACH)
    iid = d.engine.start("each", {"items": [1, 2, 3, 4]}).instance_id
    failed = d.run(iid)
    assert failed.status is InstanceStatus.FAILED
    before = list(calls)
    assert 1 in before and 2 in before
    fixed[0] = True
    d.engine.retry(iid)
    done = d.run(iid)
    assert done.status is InstanceStatus.COMPLETED
    assert done.context == [10, 20, 30, 40]
    again = calls[len(before) :]
    assert sorted(before + again) == [1, 2, 2, 3, 4]  # only the failed element runs twice


PARENT = """
wiggle: 1
name: parent
steps:
  - task: prep
  - subflow: child
  - task: finish
"""
CHILD = """
wiggle: 1
name: child
steps:
  - task: kid
"""


@pytest.mark.parametrize("which", ["parent", "child"])
def test_retry_brings_back_a_failed_child_and_its_waiting_parent(make_driver, which):
    fixed = [False]

    def kid(ctx):
        if not fixed[0]:
            raise Fail("kid failed", non_retryable=True)
        return {**ctx, "kid": True}

    d = make_driver({"prep": lambda c: {"p": 1}, "kid": kid, "finish": lambda c: {**c, "f": 1}})
    d.deploy(CHILD)
    d.deploy(PARENT)
    iid = d.engine.start("parent", {}).instance_id
    failed = d.run(iid)
    assert failed.status is InstanceStatus.FAILED
    (child_id,) = failed.child_instance_ids
    assert d.engine.describe(child_id).status is InstanceStatus.FAILED
    fixed[0] = True
    result = d.engine.retry(iid if which == "parent" else child_id)
    assert result.instances == [iid, child_id]
    done = d.run(iid)
    assert done.status is InstanceStatus.COMPLETED
    assert done.context == {"p": 1, "kid": True, "f": 1}
    assert d.engine.describe(child_id).status is InstanceStatus.COMPLETED
    assert d.ran.count("prep") == 1


def test_retry_refuses_a_parent_whose_child_was_cancelled(make_driver):
    d = make_driver({"prep": lambda c: c, "kid": lambda c: c, "finish": lambda c: c})
    d.deploy(CHILD)
    d.deploy(PARENT)
    iid = d.engine.start("parent", {}).instance_id
    view = d.run(iid, until=lambda v: bool(v.child_instance_ids))
    d.engine.cancel(view.child_instance_ids[0])
    assert d.engine.describe(iid).status is InstanceStatus.FAILED
    with pytest.raises(RepairRefused, match="was cancelled; a retry does not undo a cancel"):
        d.engine.retry(iid)


def test_retry_refuses_a_loop_that_ran_over_its_limit(make_driver):
    d = make_driver({"step": lambda c: c, "more": lambda c: True})
    d.deploy(
        "wiggle: 1\nname: spin\nsteps:\n  - loop:\n      steps:\n        - task: step\n"
        "      while: more\n      max_iterations: 2\n"
    )
    iid = d.engine.start("spin", {}).instance_id
    assert d.run(iid).status is InstanceStatus.FAILED
    with pytest.raises(RepairRefused, match="a retry cannot mend"):
        d.engine.retry(iid)


def test_a_zombie_report_after_a_retry_is_refused_and_the_step_completes_once(engine):
    """The failed step's lease expired (its worker stalled), the instance failed, an operator
    retried it and another worker ran the step: the stalled worker's late report is refused."""
    from wiggle.compiler import load_flow

    engine.register(
        load_flow(
            "wiggle: 1\nname: z\nsteps:\n  - task: slow\n    timeout: 1s\n"
            "    retry: {max_attempts: 1}\n  - task: next\n"
        )
    )
    iid = engine.start("z", {}).instance_id
    (zombie,) = engine.poll(["default"], "stalled", 1)
    # Expire the lease now rather than waiting for it.
    engine.db.write(
        lambda c: c.exec_driver_sql(
            "UPDATE wiggle_tokens SET lease_expires_at_ms = 1 WHERE id = ?"
            if engine.db.is_sqlite
            else "UPDATE wiggle_tokens SET lease_expires_at_ms = 1 WHERE id = %s",
            (zombie.task_id,),
        )
    )
    engine.tick()
    assert engine.describe(iid).status is InstanceStatus.FAILED
    engine.retry(iid)
    (fresh,) = engine.poll(["default"], "healthy", 1)
    assert (fresh.node_id, fresh.attempt) == ("slow", 1)
    with pytest.raises(StaleLease):
        engine.complete(zombie.task_id, zombie.lease, {"late": True}, seq=1)
    engine.complete(fresh.task_id, fresh.lease, {"fresh": True}, seq=1)
    view = engine.describe(iid, include_events=True)
    completed = [e for e in events_of(view, "step_completed") if e.node_id == "slow"]
    assert len(completed) == 1
    (nxt,) = engine.poll(["default"], "healthy", 1)
    assert nxt.input == {"fresh": True}


# -- reset ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_reset_a_completed_instance_to_a_node_it_passed(make_driver, mode):
    seen_by_b: list[dict] = []

    def b(ctx):
        seen_by_b.append(ctx)
        return {**ctx, "b": len(seen_by_b)}

    d = make_driver({"a": lambda c: {**c, "a": 1}, "b": b, "c": lambda c: {**c, "c": 1}}, mode=mode)
    d.deploy(LINEAR)
    iid = d.engine.start("lin", {"x": 1}).instance_id
    assert d.run(iid).status is InstanceStatus.COMPLETED
    result = d.engine.reset(iid, "b", by="ops")
    assert result.status is InstanceStatus.RUNNING
    done = d.run(iid)
    assert done.status is InstanceStatus.COMPLETED
    assert seen_by_b == [{"x": 1, "a": 1}, {"x": 1, "a": 1}]
    assert done.context == {"x": 1, "a": 1, "b": 2, "c": 1}
    assert d.ran.count("a") == 1
    (ev,) = events_of(done, "instance_reset")
    assert ev.detail == {"from": [], "to": "b", "status_before": "COMPLETED", "by": "ops"}


def test_reset_refusals_name_what_would_work(make_driver):
    d = make_driver(
        {
            "l1": lambda c: c,
            "l2": lambda c: c,
            "r1": lambda c: c,
            "merge": lambda i: {},
            "after": lambda c: c,
        }
    )
    d.deploy(PARALLEL)
    iid = d.engine.start("par", {}).instance_id
    with pytest.raises(InvalidRequest, match="has no node 'nope'; its nodes: after, l1"):
        d.engine.reset(iid, "nope")
    with pytest.raises(
        InvalidRequest, match=r"inside parallel block 'parallel-1'.*reset to 'parallel-1' instead"
    ):
        d.engine.reset(iid, "l2")
    with pytest.raises(InvalidRequest, match="never reached node 'after'"):
        d.engine.reset(iid, "after")
    with pytest.raises(InvalidRequest, match="the end of the flow"):
        d.engine.reset(iid, "end")
    d.engine.cancel(iid)
    with pytest.raises(RepairRefused, match="was cancelled"):
        d.engine.reset(iid, "parallel-1")


@pytest.mark.parametrize("mode", MODES)
def test_reset_fences_a_worker_still_running_the_old_position(make_driver, mode):
    """A worker mid-run when the instance is reset: its reports are refused, none applied."""
    d = make_driver(
        {"a": lambda c: {**c, "a": 1}, "b": lambda c: {**c, "b": 1}, "c": lambda c: {**c, "c": 1}},
        mode=mode,
    )
    d.deploy(LINEAR)
    eng = d.engine
    iid = eng.start("lin", {"x": 1}).instance_id
    (first,) = eng.poll(["default"], "w", 1)
    eng.complete(first.task_id, first.lease, {"x": 1, "a": 1}, seq=1)
    (held,) = eng.poll(["default"], "old-worker", 1)
    assert held.node_id == "b"
    eng.reset(iid, "a")
    with pytest.raises(StaleLease):
        if mode == "server":
            eng.complete(held.task_id, held.lease, {"stale": True}, seq=1)
        else:
            eng.advance_run(
                held.task_id,
                held.lease,
                [StepOutcome("b", context={"stale": 1}), StepOutcome("c", context={"stale": 2})],
                final=True,
                seq=1,
            )
    with pytest.raises(StaleLease):
        eng.heartbeat(held.task_id, held.lease)
    view = eng.describe(iid, include_events=True)
    assert not [e for e in events_of(view, "step_completed") if e.node_id in ("b", "c")]
    (again,) = eng.poll(["default"], "w", 1)
    assert (again.node_id, again.input) == ("a", {"x": 1})


def test_reset_keeps_buffered_signals_and_loop_counts(make_driver):
    flow = """
wiggle: 1
name: looped
steps:
  - loop:
      steps:
        - task: tick
      while: more
      max_iterations: 10
  - await: go
  - task: done
"""
    d = make_driver(
        {"tick": lambda c: {"n": c["n"] + 1}, "more": lambda c: c["n"] < 3, "done": lambda c: c}
    )
    d.deploy(flow)
    iid = d.engine.start("looped", {"n": 0}).instance_id
    d.run(iid, until=lambda v: any(t.state is TokenState.AWAITING for t in v.tokens))
    d.engine.reset(iid, "tick")
    d.engine.signal(iid, "go", {"ok": 1})  # buffered: nobody awaits yet
    view = d.run(iid)
    assert view.status is InstanceStatus.COMPLETED
    # The loop went on from its third visit of `tick` (n was 2): one more tick, then the await
    # took the buffered signal.
    assert view.context == {"n": 3}


def test_a_failed_instance_reset_cannot_then_be_retried_into_its_old_position(make_driver):
    fixed, b = _broken_then_fixed()
    d = make_driver({"a": lambda c: {**c, "a": 1}, "b": b, "c": lambda c: c})
    d.deploy(LINEAR)
    iid = d.engine.start("lin", {}).instance_id
    assert d.run(iid).status is InstanceStatus.FAILED
    d.engine.reset(iid, "a")
    assert d.engine.describe(iid).status is InstanceStatus.RUNNING
    assert d.run(iid).status is InstanceStatus.FAILED  # b still broken
    fixed[0] = True
    d.engine.retry(iid)
    assert d.run(iid).status is InstanceStatus.COMPLETED


def test_retry_refused_for_an_instance_that_failed_before_halted_states_were_kept(engine):
    from wiggle.compiler import load_flow

    engine.register(load_flow("wiggle: 1\nname: one\nsteps:\n  - task: a\n"))
    iid = engine.start("one", {}).instance_id
    (task,) = engine.poll(["default"], "w", 1)
    engine.fail(task.task_id, task.lease, StepFailure("x", non_retryable=True))
    engine.db.write(lambda c: c.exec_driver_sql("UPDATE wiggle_tokens SET halted = NULL"))
    with pytest.raises(RepairRefused, match="no record of where it was"):
        engine.retry(iid)


def test_inputs_entered_in_a_transition_that_logs_no_event_get_an_event_of_their_own(engine):
    """The inputs ride on the instance's last event of the transition; one that logged none
    (no such move exists today) still keeps them, on an `inputs_recorded` event."""
    from wiggle.engine.store.inputs import recorded_inputs

    engine.register(load_flow(LINEAR))
    iid = engine.start("lin", {"n": 1}).instance_id

    def enter(conn):
        tx = engine.ops.tx(conn)
        tx.entered_at(iid, "c", {"n": 7}, {"c": 2})
        tx.finish()

    engine.db.write(enter)
    kept = engine.db.read(lambda conn: recorded_inputs(conn, iid))
    assert (kept["c"].context, kept["c"].loop_counts) == ({"n": 7}, {"c": 2})
    assert kept["a"].context == {"n": 1}
    view = engine.describe(iid, include_events=True)
    assert view.events[-1].kind == "inputs_recorded"
    assert len(events_of(view, "inputs_recorded")) == 1
