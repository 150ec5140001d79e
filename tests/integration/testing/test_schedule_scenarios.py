"""Schedules in scenarios (docs/testing.md, "Schedules: fires on a virtual clock"): a scenario
names a schedule of its flow, its timeline moves the clock across days and through outages, and
it expects the nominal times fired and skipped. Refused at load with every problem at
FILE:LINE:COL; run under every mode on the virtual clock; failures say what fired against what
was expected."""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import pytest

from wiggle.errors import FlowError
from wiggle.testing import MODES, FlowTest, load_scenario_file
from wiggle.testing._report import failure_lines
from wiggle.testing._runner import find_scenario_files, run_files

ROOT = Path(__file__).resolve().parents[3]

FLOW = """\
wiggle: 1
name: report
input: {type: object, required: [day]}
steps:
  - task: build
  - sleep: 25m
  - task: send
"""

HANDLERS = """\
from wiggle import activity


@activity
def build(ctx):
    return {**ctx, "built": True}


@activity
def send(ctx):
    return {**ctx, "sent": ctx["day"]}
"""

# 02:30 in Berlin, the night's report; a run sleeps 25 minutes between its two steps.
SCHEDULE = """\
schedule: report
flow: report
time_zone: Europe/Berlin
cron: "30 2 * * *"
catch_up: {missed: latest, window: 12h}
input: {}
input_values: {day: "instance.nominal_time.substring(0, 10)"}
"""

HEAD = "wiggle_test: 1\nflow: report.yaml\nhandlers: handlers.py\nschedule: report.schedule.yaml\n"


def write(tmp_path: Path, scenarios: str, *, head: str = HEAD, schedule: str = SCHEDULE) -> Path:
    (tmp_path / "report.yaml").write_text(FLOW)
    (tmp_path / "handlers.py").write_text(HANDLERS)
    (tmp_path / "report.schedule.yaml").write_text(schedule)
    path = tmp_path / "report.scenarios.yaml"
    path.write_text(head + "scenarios:\n" + scenarios)
    return path


def problems(tmp_path: Path, scenarios: str, **kwargs: str) -> list[str]:
    path = write(tmp_path, scenarios, **kwargs)
    with pytest.raises(FlowError) as caught:
        load_scenario_file(path)
    return [
        str(d).replace(str(path), "S").replace(str(tmp_path / "report.schedule.yaml"), "SCH")
        for d in caught.value.diagnostics
    ]


# -- loading --------------------------------------------------------------------------------------


def test_a_schedule_scenario_loads_with_its_times(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "  - name: spring\n    start_time: 2026-03-28T12:00:00+01:00\n"
        "    timeline:\n      - {at: 2026-03-29T00:00:00+01:00, outage: 6h}\n      - at: 1d\n"
        "    expect:\n      fired: [2026-03-29T03:00:00+02:00, report-20260330T003000Z]\n"
        "      skipped: [{at: 2026-03-28T02:30:00+01:00, reason: window}]\n",
        head=HEAD + "start_time: 2026-03-27T12:00:00+01:00\n",
    )
    (scenario,) = load_scenario_file(path).scenarios
    assert scenario.schedule is not None and scenario.schedule.name == "report"
    assert [(m.at_ms, m.outage_ms) for m in scenario.timeline] == [
        (12 * 3_600_000, 6 * 3_600_000),
        (86_400_000, None),
    ]
    assert scenario.expect is not None and scenario.expect.fired is not None
    # 03:00 CEST and 02:30 CEST on the next night, both as UTC milliseconds.
    assert [f.text for f in scenario.expect.fired] == [
        "2026-03-29T03:00:00+02:00",
        "report-20260330T003000Z",
    ]
    fired = [f.nominal_ms for f in scenario.expect.fired]
    assert fired[1] - fired[0] == 86_400_000 - 30 * 60_000
    assert scenario.expect.skipped is not None and scenario.expect.skipped[0].reason == "window"


def test_every_problem_of_a_schedule_scenario_is_located(tmp_path: Path) -> None:
    got = problems(
        tmp_path,
        "  - name: a\n"
        "    input: {day: x}\n"
        "    start_time: 2026-10-24T12:00:00+02:00\n"
        "    timeline:\n"
        "      - at: 2026-10-24T11:00:00+02:00\n"
        "      - at: tomorrow\n"
        "      - cancel: stop\n"
        "    expect:\n"
        "      fired: [2026-10-25T02:30:00+01:00, report-2026, 2026-10-25T02:30:00+02:00]\n"
        # 01:30 UTC on 26 October is 02:30 in Berlin (winter): a nominal time, no problem.
        "      skipped: [{at: 2026-10-26T01:30:00Z, reason: x}]\n",
    )
    assert got == [
        "S:7:5: a scenario with a schedule starts no instance of its own: the schedule's fires "
        "start them, with the schedule's input",
        "S:10:13: 2026-10-24T11:00:00+02:00 is before the scenario's start (2026-10-24T10:00:00Z)",
        "S:11:13: 'tomorrow' is neither a duration (250ms, 30s, 5m, 2h, 1d) nor an RFC 3339 "
        "instant with an offset (2026-10-25T02:30:00+02:00)",
        "S:12:9: a scenario with a schedule has no instance of its own to cancel: its instances "
        "are the schedule's",
        # The second 02:30 of the autumn night is not a nominal time under `repeated: first`.
        "S:14:15: 2026-10-25T02:30:00+01:00 is not a time schedule 'report' fires at; the next "
        "one after it is 2026-10-26T02:30:00+01:00",
        "S:14:42: 'report-2026' is neither an RFC 3339 instant with an offset "
        "(2026-10-25T02:30:00+02:00) nor an instance id of schedule 'report' "
        "(report-YYYYMMDDTHHMMSSZ)",
    ]


def test_fires_need_a_schedule_and_the_schedule_must_be_of_the_flow(tmp_path: Path) -> None:
    got = problems(
        tmp_path,
        "  - name: a\n    input: {day: x}\n    timeline: [{expect: {fired: []}}]\n"
        "    expect: {skipped: []}\n"
        "  - name: b\n    schedule: other.schedule.yaml\n"
        "  - name: c\n    schedule: missing.schedule.yaml\n    expect: {fired: []}\n",
        head="wiggle_test: 1\nflow: report.yaml\nhandlers: handlers.py\n",
    )
    assert got == [
        "S:7:26: 'fired' is about a schedule's fires: name the schedule file under `schedule:`",
        "S:8:14: 'skipped' is about a schedule's fires: name the schedule file under `schedule:`",
        f"S:10:15: schedule file other.schedule.yaml does not exist (looked in {tmp_path})",
        f"S:12:15: schedule file missing.schedule.yaml does not exist (looked in {tmp_path})",
    ]
    (tmp_path / "other.schedule.yaml").write_text(
        "schedule: other\nflow: elsewhere\ncron: '@daily'\n"
    )
    got = problems(
        tmp_path,
        "  - name: b\n    schedule: other.schedule.yaml\n",
        head="wiggle_test: 1\nflow: report.yaml\nhandlers: handlers.py\n",
    )
    assert got == [
        "S:6:15: schedule 'other' (other.schedule.yaml) starts flow 'elsewhere', not 'report', "
        "the flow under test"
    ]


def test_the_schedule_files_own_problems_and_an_input_the_flow_refuses(tmp_path: Path) -> None:
    got = problems(
        tmp_path,
        "  - name: a\n",
        schedule=SCHEDULE.replace('"30 2 * * *"', '"61 2 * * *"'),
    )
    assert len(got) == 1 and got[0].startswith("SCH:4:7: cron '61 2 * * *': a bad minute")
    got = problems(tmp_path, "  - name: a\n", schedule=SCHEDULE.replace("input_values", "x_"))
    assert got[0].startswith("SCH:7:1: unknown key 'x_'")
    # Without input_values, the input lacks `day`, which the flow requires.
    no_day = "".join(line + "\n" for line in SCHEDULE.splitlines() if "input_values" not in line)
    got = problems(tmp_path, "  - name: a\n", schedule=no_day)
    assert got == [
        "S:4:11: schedule 'report' (report.schedule.yaml) starts it with an input it refuses: "
        "'day' is a required property"
    ]
    pinned = SCHEDULE + "version: sha256:" + "0" * 64 + "\n"
    (got,) = problems(tmp_path, "  - name: a\n", schedule=pinned)
    assert got.startswith("S:4:11: schedule 'report' (report.schedule.yaml) pins version sha256:")


def test_at_takes_an_instant_in_any_scenario_and_time_still_never_goes_back(
    tmp_path: Path,
) -> None:
    got = problems(
        tmp_path,
        "  - name: a\n    input: {day: x}\n    start_time: 2026-01-01T00:00:00Z\n"
        "    timeline:\n      - at: 2026-01-01T02:00:00+01:00\n      - at: 30m\n",
        head="wiggle_test: 1\nflow: report.yaml\nhandlers: handlers.py\n",
    )
    assert got == [
        "S:10:13: at 30m is before the time the timeline already reached (1h after the start)"
    ]


# -- running --------------------------------------------------------------------------------------

NIGHTS = """\
  - name: spring
    description: 02:30 does not exist on 29 March 2026 in Berlin; it runs once, at 03:00.
    start_time: 2026-03-28T12:00:00+01:00
    timeline:
      - at: 2026-03-29T01:59:00+01:00
        expect: {fired: []}
      - at: 2026-03-29T12:00:00+02:00
    expect:
      fired: [2026-03-29T03:00:00+02:00]
      skipped: []
      status: COMPLETED
      path: [build, sleep-1, send]
      context_at: {/sent: "2026-03-29"}
      calls: {build: 1}
  - name: outage
    description: No server from midnight to 06:00; the 02:30 run starts once, at 06:00.
    start_time: 2026-06-14T12:00:00+02:00
    timeline:
      - {at: 2026-06-15T00:00:00+02:00, outage: 6h}
      - expect: {fired: [report-20260615T003000Z], status: RUNNING, waiting_at: [sleep-1]}
      - {at: 2026-06-16T00:00:00+02:00, outage: 16h}
      - at: 2026-06-17T12:00:00+02:00
    expect:
      fired: [2026-06-15T02:30:00+02:00, 2026-06-17T02:30:00+02:00]
      skipped: [{at: 2026-06-16T02:30:00+02:00, reason: older than the catch-up window}]
      calls: {build: 2, send: 2}
  - name: spring-again
    description: The night of `spring` again, in the same run (the same instance ids).
    start_time: 2026-03-29T00:00:00+01:00
    timeline: [{at: 2026-03-30T12:00:00+02:00}]
    expect: {fired: [report-20260329T010000Z, report-20260330T003000Z]}
"""


def test_schedule_scenarios_pass_in_every_mode_in_milliseconds_a_day(tmp_path: Path) -> None:
    path = write(tmp_path, NIGHTS)
    began = time.process_time()
    report = run_files([path], coverage=True)
    spent = time.process_time() - began
    assert [(r.scenario, r.mode) for r in report.runs if not r.passed] == [], "\n".join(
        failure_lines(report)
    )
    assert len(report.runs) == 3 * len(MODES)
    outage = next(r for r in report.runs if r.scenario == "outage")
    assert outage.fires == [
        "2026-06-15T02:30:00+02:00 started report-20260615T003000Z",
        "2026-06-16T02:30:00+02:00 skipped: missed, older than the catch-up window",
        "2026-06-17T02:30:00+02:00 started report-20260617T003000Z",
    ]
    assert outage.instance == "report-20260617T003000Z" and outage.status == "COMPLETED"
    assert report.coverage.flows["report"].percent == 100.0
    # Nine runs over about seven simulated days: CPU time, not days of waiting (generous).
    assert spent < 10


def test_a_wrong_expectation_fails_showing_what_fired(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "  - name: wrong\n    start_time: 2026-03-28T12:00:00+01:00\n"
        "    timeline: [{at: 1d}]\n"
        "    expect:\n"
        "      fired: [2026-03-28T02:30:00+01:00]\n"
        "      skipped: [{at: 2026-03-29T03:00:00+02:00, reason: overlap}]\n"
        "      context_at: {/sent: nope}\n",
    )
    report = run_files([path], modes=["SERVER"])
    (run,) = report.runs
    assert not run.passed
    assert run.problems == [
        "fired differs\n"
        "  expected: [2026-03-28T02:30:00+01:00]\n"
        "  actual:   [2026-03-29T03:00:00+02:00]\n"
        "  2026-03-28T02:30:00+01:00 (expected): before the schedule was applied, at "
        "2026-03-28T12:00:00+01:00\n"
        "  2026-03-29T03:00:00+02:00 (not expected): started report-20260329T010000Z",
        "skipped differs\n"
        "  expected: [2026-03-29T03:00:00+02:00]\n"
        "  actual:   []\n"
        "  2026-03-29T03:00:00+02:00 (expected): started report-20260329T010000Z",
        'instance report-20260329T010000Z: context at \'/sent\': expected "nope", got "2026-03-29"',
    ]
    lines = list(failure_lines(report))
    assert "  the schedule's fires:" in lines
    assert "    2026-03-29T03:00:00+02:00 started report-20260329T010000Z" in lines
    assert any(line.startswith("  report-20260329T010000Z ended COMPLETED") for line in lines)


def test_a_run_without_fires_fails_instance_expectations(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "  - name: none\n    start_time: 2026-03-28T03:00:00+01:00\n"
        "    timeline: [{at: 2h}]\n    expect: {fired: [], status: COMPLETED}\n",
    )
    (run, *_) = run_files([path], modes=["SERVER"]).runs
    assert run.problems == ["expected instances to check, but schedule 'report' started none"]


def test_a_buffered_fire_starts_when_the_running_one_ends(tmp_path: Path) -> None:
    buffering = SCHEDULE.replace('"30 2 * * *"', '"*/10 * * * *"') + "overlap: buffer_one\n"
    # Each run holds for 25 minutes: 00:10 runs, 00:20 waits, 00:30 is skipped (one waits
    # already); 00:20 starts when 00:10 ends, at 00:35.
    buffering = buffering.replace("hold: 1m", "hold: 25m").replace("Europe/Berlin", "UTC")
    path = write(
        tmp_path,
        "  - name: buffered\n    start_time: 2026-01-01T00:05:00Z\n"
        "    timeline:\n      - at: 2026-01-01T00:34:00Z\n"
        "        expect: {fired: [report-20260101T001000Z]}\n"
        "      - at: 2026-01-01T00:36:00Z\n"
        "    run_to_end: false\n"
        "    expect:\n"
        "      fired: [report-20260101T001000Z, report-20260101T002000Z]\n"
        "      skipped: [{at: report-20260101T003000Z, reason: still running}]\n",
        schedule=buffering,
    )
    report = run_files([path])
    assert all(r.passed for r in report.runs), "\n".join(failure_lines(report))


def test_flowtest_applies_a_schedule_and_moves_through_an_outage(tmp_path: Path) -> None:
    write(tmp_path, "  - name: unused\n")
    with FlowTest(
        tmp_path / "report.yaml",
        handlers=tmp_path / "handlers.py",
        start_time="2026-10-24T12:00:00+02:00",
    ) as run:
        run.apply_schedule(tmp_path / "report.schedule.yaml")
        run.advance("1d")  # the autumn night: the first 02:30 only
        assert run.started == ["report-20261025T003000Z"]
        run.outage("1d")  # through 26 October, 02:30: caught up when the outage ends
        assert run.observed(run.started[-1]).status == "RUNNING"  # its 25-minute sleep
        run.run_to_end()
        run.expect(
            fired=["2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"],
            skipped=[],
            status="COMPLETED",
            calls={"send": 2},
        )
        fire = run.fires()[-1]
        assert (fire.outcome, fire.instance_id) == ("started", "report-20261026T013000Z")
        with pytest.raises(AssertionError, match="fired differs"):
            run.expect(fired=[])


def test_a_schedule_names_its_scenario_file(tmp_path: Path) -> None:
    (tmp_path / "schedules").mkdir()
    (tmp_path / "scenarios").mkdir()
    target = tmp_path / "schedules" / "report.schedule.yaml"
    target.write_text(SCHEDULE)
    found = tmp_path / "scenarios" / "report.schedule.scenarios.yaml"
    found.write_text("")
    assert find_scenario_files([str(target)]) == ([found], [])


def test_the_shipped_schedule_scenarios_run_from_their_schedules() -> None:
    targets = sorted(str(p) for p in (ROOT / "definitions" / "schedules").glob("*.schedule.yaml"))
    files, problems = find_scenario_files(targets)
    assert problems == [] and len(files) == len(targets) == 3
    report = run_files(files)
    assert report.failed == 0 and report.errors == [], "\n".join(failure_lines(report))
    assert report.passed == 6 * len(MODES)


# -- docs/testing.md ------------------------------------------------------------------------------

_DOC_BLOCK = re.compile(r"<!-- schedules(?P<fails>: fails)? -->\n```yaml\n(?P<body>.*?)```", re.S)
_DOC_TEXT = re.compile(r"```text\n(?P<body>.*?)```", re.S)


def test_the_docs_schedule_example_runs_and_its_wrong_scenario_fails_as_shown(
    tmp_path: Path,
) -> None:
    doc = (ROOT / "docs" / "testing.md").read_text()
    blocks = {bool(m.group("fails")): m for m in _DOC_BLOCK.finditer(doc)}
    passing, failing = blocks[False].group("body"), blocks[True].group("body")
    shown = _DOC_TEXT.search(doc, blocks[True].end())
    assert shown is not None
    shutil.copytree(ROOT / "definitions", tmp_path / "definitions")
    path = tmp_path / "definitions" / "scenarios" / "docs.scenarios.yaml"
    path.write_text(passing)
    report = run_files([path])
    assert report.errors == [] and report.failed == 0, "\n".join(failure_lines(report))
    assert report.passed == 2 * len(MODES)
    path.write_text(passing + failing)
    report = run_files([path], select="two-nights", modes=["SERVER"])
    assert report.failed == 1
    printed = list(failure_lines(report))
    for line in shown.group("body").splitlines():
        assert line in printed, f"the page shows a line wiggle test does not print:\n{line}"
