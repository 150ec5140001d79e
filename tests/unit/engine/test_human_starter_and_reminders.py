"""A human step's `exclude: [starter]` and `remind` under `wiggle test`: a FlowTest or a
scenario says who starts the instance (`start(person=...)`, `started_by:`), and the virtual
clock fires the reminders at their times as it fires timers. Run by the real engine in-process
(wiggle.testing.FlowTest: in-memory SQLite, virtual clock)."""

from __future__ import annotations

from pathlib import Path

import pytest

from wiggle.compiler import load_flow
from wiggle.engine import InstanceStatus
from wiggle.errors import PermissionDenied
from wiggle.testing import MODES, FlowTest

HOUR = 3_600_000

TEXT = (
    "wiggle: 1\nname: expense\nsteps:\n"
    "  - task: file\n"
    "  - human: approve\n    title: Approve\n    form: {}\n"
    "    candidates: {people: [carol, dave]}\n"
    "    exclude: [starter]\n    remind: [1h, 1d]\n    timeout: 2d\n"
    "    on_timeout:\n      - task: escalate\n"
    "    into: decision\n"
)
FLOW = load_flow(TEXT)
HANDLERS = {"file": lambda ctx: ctx, "escalate": lambda ctx: {**ctx, "escalated": True}}


def _reminders(run: FlowTest) -> list[tuple[int, int]]:
    """(reminder number, ms since the start) of each `human_task_reminded` event."""
    return [
        (e.detail["reminder"], e.at_ms - run.start_ms)
        for e in run.view().events
        if e.kind == "human_task_reminded"
    ]


@pytest.mark.parametrize("mode", MODES)
def test_the_starter_may_not_answer_and_the_clock_fires_the_reminders(mode: str) -> None:
    with FlowTest(FLOW, handlers=HANDLERS, mode=mode) as run:
        run.start({}, person="carol")
        assert run.view(events=False).started_by == "carol"
        with pytest.raises(PermissionDenied, match="they started the instance"):
            run.complete_task("approve", {"ok": True}, person="carol")
        run.advance("59m")
        assert _reminders(run) == []
        run.advance("1m")
        assert _reminders(run) == [(1, HOUR)]
        run.run_to_end()  # the second reminder, then the deadline and its escalation
        assert _reminders(run) == [(1, HOUR), (2, 24 * HOUR)]
        assert run.status is InstanceStatus.COMPLETED
        assert run.context == {"escalated": True}
        run.expect(
            events=[
                {"kind": "human_task_reminded", "node": "approve", "detail": {"reminder": 1}},
                {"kind": "human_task_reminded", "node": "approve", "detail": {"reminder": 2}},
                {"kind": "timer_fired", "node": "approve"},
            ]
        )


def test_no_reminder_after_the_answer_and_no_starter_without_a_person() -> None:
    with FlowTest(FLOW, handlers=HANDLERS) as run:
        run.start({})
        assert run.view(events=False).started_by == ""
        run.advance("2h")
        run.complete_task("approve", {"ok": True}, person="carol")  # nobody is the starter
        run.run_to_end()
        assert run.status is InstanceStatus.COMPLETED
        assert _reminders(run) == [(1, HOUR)]
        assert run.now_ms == 2 * HOUR  # nothing left to move the clock to


def _scenarios(tmp_path: Path, body: str) -> Path:
    (tmp_path / "expense.yaml").write_text(TEXT)
    path = tmp_path / "expense.scenarios.yaml"
    path.write_text(
        "wiggle_test: 1\nflow: expense.yaml\n"
        "activities: {file: {merge: {}}, escalate: {merge: {escalated: true}}}\n"
        "scenarios:\n" + body
    )
    return path


def test_a_scenario_says_who_started_and_sees_the_reminders(tmp_path: Path) -> None:
    from wiggle.testing._runner import run_files

    path = _scenarios(
        tmp_path,
        "  - name: four-eyes\n    input: {}\n    started_by: carol\n"
        "    timeline:\n"
        "      - at: 1h\n"
        "        expect:\n"
        "          events:\n"
        "            - {kind: human_task_reminded, node: approve, detail: {reminder: 1}}\n"
        "      - {at: 2h, complete: {task: approve, as: dave, answer: {ok: true}}}\n"
        "    expect:\n      status: COMPLETED\n      context: {decision: {ok: true}}\n"
        "      events:\n"
        "        - {kind: instance_started, detail: {started_by: carol}}\n"
        "        - {kind: human_task_created, detail: {excluded: [carol]}}\n"
        "        - {kind: human_task_reminded, detail: {reminder: 1, people: [dave]}}\n"
        "        - {kind: human_task_completed, detail: {by: dave}}\n"
        "  - name: the-starter-answers\n    input: {}\n    started_by: carol\n"
        "    timeline: [{complete: {task: approve, as: carol, answer: {ok: true}}}]\n",
    )
    report = run_files([path])
    assert not report.errors
    runs = [(r.scenario, r.mode, r.problems) for r in report.runs]
    assert [(s, m) for s, m, p in runs if not p] == [("four-eyes", m) for m in MODES]
    refused = [p for s, _, p in runs if s == "the-starter-answers"]
    assert len(refused) == len(MODES)
    for (problem,) in refused:
        assert "'carol' may not act on human task" in problem
        assert "(four eyes: they started the instance)" in problem


def test_a_scenario_under_a_schedule_names_no_starter(tmp_path: Path) -> None:
    from wiggle.testing._runner import run_files

    (tmp_path / "expense.schedule.yaml").write_text(
        "schedule: nightly\nflow: expense\ncron: '0 2 * * *'\n"
    )
    path = _scenarios(
        tmp_path,
        "  - name: s\n    schedule: expense.schedule.yaml\n    started_by: carol\n",
    )
    report = run_files([path], modes=["SERVER"])
    assert [str(e) for e in report.errors] == [
        f"{path}:7:5: a scenario with a schedule starts no instance of its own: the schedule's "
        "fires start them, and no person is their starter"
    ]
