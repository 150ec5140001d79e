"""A human step's answer: the step is an await of `task:<name>` whose task a person answers
(a FlowTest's `signal('task:<name>', ...)` answers it as an admin), and its `into` puts the
answer under a context key. Run by the real engine
in-process (wiggle.testing.FlowTest: in-memory SQLite, virtual clock)."""

from __future__ import annotations

import pytest

from wiggle.compiler import load_flow
from wiggle.engine import InstanceStatus
from wiggle.errors import InvalidRequest
from wiggle.testing import MODES, FlowTest, ScenarioError

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


def test_an_answer_cannot_come_before_the_task_nor_as_a_bare_signal() -> None:
    """A human step's answer goes through its task (docs/human-tasks.md): there is none to
    answer before the step is reached, and the signal itself is refused."""
    flow = load_flow(
        "wiggle: 1\nname: early\nsteps:\n  - await: first\n"
        "  - human: approve\n    title: Approve\n    form: {}\n    assignee: alice\n"
        "    into: decision\n"
    )
    with FlowTest(flow) as run:
        run.start({})
        with pytest.raises(ScenarioError, match="no human task 'approve' is open"):
            run.signal("task:approve", False)
        with pytest.raises(InvalidRequest, match="complete the task instead"):
            run.engine.signal(run.instance_id, "task:approve", False)
        run.signal("first")
        assert run.waiting_at == ["approve"]
        run.signal("task:approve", False)
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


def test_a_scenario_completes_a_task_as_a_named_person(tmp_path) -> None:
    from wiggle.testing._runner import run_files

    (tmp_path / "approval.yaml").write_text(
        "wiggle: 1\nname: approval\nsteps:\n"
        "  - human: approve\n    title: Approve\n"
        "    form: {type: object, required: [approved]}\n"
        "    assignee: alice\n    candidates: {groups: [finance]}\n    into: decision\n"
    )
    path = tmp_path / "approval.scenarios.yaml"
    path.write_text(
        "wiggle_test: 1\nflow: approval.yaml\nscenarios:\n"
        "  - name: by-a-group-member\n    input: {}\n"
        "    timeline:\n"
        "      - complete:\n"
        "          {task: approve, as: frank, groups: [finance], answer: {approved: true}}\n"
        "    expect: {status: COMPLETED, context: {decision: {approved: true}}}\n"
        "  - name: by-a-stranger\n    input: {}\n"
        "    timeline: [{complete: {task: approve, as: mallory, answer: {approved: true}}}]\n"
        "  - name: off-the-form\n    input: {}\n"
        "    timeline: [{complete: {task: approve, as: alice, answer: {}}}]\n"
    )
    report = run_files([path], modes=["SERVER"])
    assert not report.errors
    runs = {r.scenario: r for r in report.runs}
    assert runs["by-a-group-member"].passed
    (stranger,) = runs["by-a-stranger"].problems
    assert "'mallory' may not act on human task" in stranger
    (off,) = runs["off-the-form"].problems
    assert "answer rejected by the form of human task" in off
    assert "'approved' is a required property" in off


def test_a_scenario_cannot_complete_a_step_that_is_not_human(tmp_path) -> None:
    from wiggle.testing._runner import run_files

    (tmp_path / "f.yaml").write_text("wiggle: 1\nname: f\nsteps:\n  - await: go\n")
    path = tmp_path / "f.scenarios.yaml"
    path.write_text(
        "wiggle_test: 1\nflow: f.yaml\nscenarios:\n"
        "  - name: s\n    input: {}\n    timeline: [{complete: {task: go, as: a}}]\n"
    )
    report = run_files([path], modes=["SERVER"])
    assert [str(e) for e in report.errors] == [f"{path}:6:34: flow 'f' has no human step 'go'"]
