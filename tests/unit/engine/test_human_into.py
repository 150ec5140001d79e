"""A human step's answer on today's engine: the step is an await of `task:<name>`, and its
`into` puts the answer (the signal's payload) under a context key. Run by the real engine
in-process (wiggle.testing.FlowTest: in-memory SQLite, virtual clock)."""

from __future__ import annotations

import pytest

from wiggle.compiler import load_flow
from wiggle.engine import InstanceStatus
from wiggle.testing import MODES, FlowTest

FLOW = load_flow(
    "wiggle: 1\nname: approval\n"
    "search: {approved: {pointer: /decision/approved, type: bool}}\n"
    "steps:\n"
    "  - task: prepare\n"
    "  - human: approve\n"
    "    title: Approve\n"
    "    form: {type: object, required: [approved]}\n"
    "    assignee: alice\n"
    "    into: decision\n"
    "  - await: go\n"
    "  - task: book\n"
)


def _handlers(prepare_result=None):
    return {
        "prepare": lambda ctx: (
            {**ctx, "decision": "none yet"} if prepare_result is None else prepare_result
        ),
        "book": lambda ctx: {**ctx, "booked": True},
    }


@pytest.mark.parametrize("mode", MODES)
def test_the_answer_goes_into_the_context(mode: str) -> None:
    with FlowTest(FLOW, handlers=_handlers(), mode=mode) as run:
        run.start({"invoice": 7})
        assert run.waiting_at == ["approve"]
        run.signal("task:approve", {"approved": True, "comment": "fine"})
        assert run.waiting_at == ["go"]
        # The key it replaced keeps its place; the search attribute sees the new value.
        assert run.context == {"invoice": 7, "decision": {"approved": True, "comment": "fine"}}
        assert list(run.context) == ["invoice", "decision"]
        assert run.view(events=False).search == {"approved": True}
        run.signal("go")
        assert run.status is InstanceStatus.COMPLETED
        assert run.context == {
            "invoice": 7,
            "decision": {"approved": True, "comment": "fine"},
            "booked": True,
        }
        run.assert_path(["prepare", "approve", "go", "book"])


def test_an_answer_sent_before_the_step_is_reached_is_kept_for_it() -> None:
    flow = load_flow(
        "wiggle: 1\nname: early\nsteps:\n  - await: first\n"
        "  - human: approve\n    title: Approve\n    form: {}\n    assignee: alice\n"
        "    into: decision\n"
    )
    with FlowTest(flow) as run:
        run.start({})
        run.signal("task:approve", False)
        run.signal("first")
        assert run.status is InstanceStatus.COMPLETED
        assert run.context == {"decision": False}


def test_into_fails_the_instance_on_a_context_that_is_not_an_object() -> None:
    with FlowTest(FLOW, handlers=_handlers(prepare_result=[1, 2])) as run:
        run.start({"invoice": 7})
        run.signal("task:approve", {"approved": True})
        assert run.status is InstanceStatus.FAILED
        assert run.reason == (
            "step 'approve' failed: human step 'approve' puts its answer under 'decision', "
            "which needs an object context; the context is a list"
        )


def test_a_scenario_answers_a_human_step_by_its_signal(tmp_path) -> None:
    from wiggle.testing._runner import run_files

    (tmp_path / "approval.yaml").write_text(
        "wiggle: 1\nname: approval\nsteps:\n"
        "  - human: approve\n    title: Approve\n    form: {}\n    assignee: alice\n"
        "    timeout: 2d\n    into: decision\n"
    )
    path = tmp_path / "approval.scenarios.yaml"
    path.write_text(
        "wiggle_test: 1\nflow: approval.yaml\nscenarios:\n"
        "  - name: answered\n    input: {n: 1}\n"
        "    timeline: [{at: 1h, signal: 'task:approve', payload: {approved: true}}]\n"
        "    expect: {status: COMPLETED, context: {n: 1, decision: {approved: true}}}\n"
        "  - name: silent\n    input: {n: 1}\n    expect: {status: COMPLETED, context: {n: 1}}\n"
    )
    report = run_files([path], modes=["SERVER"], coverage=True)
    assert not report.errors
    assert [(r.scenario, r.passed) for r in report.runs] == [("answered", True), ("silent", True)]
    assert report.coverage.flows["approval"].untaken() == []
