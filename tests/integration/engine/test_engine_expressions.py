"""Expression nodes on the engine: evaluated inside the transition that reaches them (SERVER
mode: no task, no lease, no handler), their values in the node's `step_completed` event, and a
failing one failing its instance for good. The local modes reach the same end through the
worker's evaluation (engine_testkit's local runner)."""

from __future__ import annotations

import pytest
from engine_testkit import MODES, events_of

from wiggle.engine import InstanceStatus

FLOW = """
wiggle: 1
name: expr
steps:
  - task: a
  - set: {total: ctx.n * 2, label: "'n=' + string(ctx.n)"}
  - choice:
      - if: ctx.total > 10
        steps: [{task: big}]
    otherwise: [{task: small}]
  - filter: {if: ctx.total != 12}
  - task: z
"""


def handlers(ran: list[str]) -> dict:
    def step(name: str):
        return lambda c: (ran.append(name), c)[1]

    return {n: step(n) for n in ("a", "big", "small", "z")}


@pytest.mark.parametrize("mode", MODES)
def test_values_are_recorded_and_the_path_follows_them(make_driver, mode):
    ran: list[str] = []
    d = make_driver(handlers(ran), mode=mode)
    d.deploy(FLOW)
    view = d.run(d.engine.start("expr", {"n": 7}).instance_id)
    assert view.status is InstanceStatus.COMPLETED
    assert view.context == {"n": 7, "total": 14, "label": "n=7"}
    assert ran == ["a", "big", "z"]
    done = {e.node_id: e.detail for e in events_of(view, "step_completed")}
    assert done["set-1"]["values"] == {"total": 14, "label": "n=7"}
    assert done["if-1"]["predicate"] is True
    assert done["filter-1"]["predicate"] is True


@pytest.mark.parametrize("mode", MODES)
def test_a_false_filter_ends_the_instance_filtered(make_driver, mode):
    ran: list[str] = []
    d = make_driver(handlers(ran), mode=mode)
    d.deploy(FLOW)
    view = d.run(d.engine.start("expr", {"n": 6}).instance_id)
    assert view.status is InstanceStatus.COMPLETED and view.reason == "filtered"
    assert ran == ["a", "big"]


def test_in_server_mode_no_task_is_made_for_an_expression(make_driver):
    ran: list[str] = []
    d = make_driver(handlers(ran), mode="server")
    d.deploy(FLOW)
    view = d.run(d.engine.start("expr", {"n": 1}).instance_id)
    assert view.status is InstanceStatus.COMPLETED and ran == ["a", "small", "z"]
    # The driver runs every task it polls by its activity (a task for an expression node
    # would have found no handler): three tasks, three handlers, and nothing left to poll.
    assert d.engine.poll(("default",), "w", 8) == []


@pytest.mark.parametrize("mode", MODES)
def test_a_failing_expression_fails_the_instance_without_a_retry(make_driver, mode):
    ran: list[str] = []
    d = make_driver(handlers(ran), mode=mode)
    d.deploy(FLOW)
    view = d.run(d.engine.start("expr", {"n": "seven"}).instance_id)
    assert view.status is InstanceStatus.FAILED
    assert view.reason.startswith("step 'set-1' failed: type_mismatch"), view.reason
    assert "ctx.n * 2" in view.reason
    (failed,) = events_of(view, "step_failed")
    assert failed.node_id == "set-1" and failed.detail["non_retryable"] is True
    assert failed.detail["error_type"] == "ExpressionError"
    assert events_of(view, "step_retried") == [] and ran == ["a"]
