"""The scenario runner: every scenario under every mode, the modes compared, coverage kept."""

from __future__ import annotations

from pathlib import Path

from wiggle.testing._report import closing_line, failure_lines
from wiggle.testing._runner import find_scenario_files, run_files

FLOW = """\
wiggle: 1
name: approval
steps:
  - task: register
  - choice:
      - when: small
        steps: [{task: approve}]
    otherwise:
      - await: decision
        timeout: 2d
        on_timeout: [{task: escalate}]
  - task: archive
"""

HANDLERS = """\
from wiggle import activity, step


@activity
def register(ctx):
    return ctx


@activity
def small(ctx):
    return ctx["amount"] < 100


@activity
def approve(ctx):
    return {**ctx, "approved": True}


@activity
def escalate(ctx):
    return {**ctx, "escalated": True}


@activity
def archive(ctx):
    return {**ctx, "archived": True}
"""


def write(tmp_path: Path, scenarios: str, handlers: str = HANDLERS) -> Path:
    (tmp_path / "approval.yaml").write_text(FLOW)
    (tmp_path / "handlers.py").write_text(handlers)
    path = tmp_path / "approval.scenarios.yaml"
    path.write_text(
        "wiggle_test: 1\nflow: approval.yaml\nhandlers: handlers.py\nscenarios:\n" + scenarios
    )
    return path


def test_every_scenario_runs_in_every_mode_and_passes(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "  - name: small\n    input: {amount: 5}\n"
        "    expect: {status: COMPLETED, path: [register, small, approve, archive]}\n"
        "  - name: silent\n    input: {amount: 500}\n"
        "    expect: {visits: [decision, escalate, archive], context_at: {/escalated: true}}\n",
    )
    report = run_files([path])
    assert [(r.scenario, r.mode, r.passed) for r in report.runs] == [
        ("small", "SERVER", True),
        ("small", "LOCAL_SYNC", True),
        ("small", "LOCAL_ASYNC", True),
        ("silent", "SERVER", True),
        ("silent", "LOCAL_SYNC", True),
        ("silent", "LOCAL_ASYNC", True),
    ]
    assert closing_line(report).startswith("=")
    assert " 6 passed in " in closing_line(report)


def test_a_wrong_expected_path_fails_with_both_paths_shown(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "  - name: wrong\n    input: {amount: 5}\n"
        "    expect: {path: [register, small, escalate, archive]}\n",
    )
    report = run_files([path], modes=["SERVER"])
    (run,) = report.runs
    assert not run.passed
    text = "\n".join(failure_lines(report))
    assert "path differs at step 3: expected 'escalate', took 'approve'" in text
    assert "expected path: [register, small, escalate, archive]" in text
    assert "actual path:   [register, small, approve, archive]" in text
    assert closing_line(report).strip("= ").startswith("1 failed in ")


def test_a_handler_that_reads_the_mode_is_a_mode_difference(tmp_path: Path) -> None:
    moody = HANDLERS.replace(
        'return {**ctx, "approved": True}',
        'return {**ctx, "approved": step().execution_mode.value}',
    )
    path = write(tmp_path, "  - name: moody\n    input: {amount: 5}\n", handlers=moody)
    runs = run_files([path]).runs
    assert [r.passed for r in runs] == [True, False, False]
    assert runs[1].problems == [
        'mode difference: the contexts differ\n  SERVER: {"amount":5,"approved":"SERVER",'
        '"archived":true}\n  LOCAL_SYNC: {"amount":5,"approved":"LOCAL_SYNC","archived":true}'
    ]


def test_coverage_names_the_edges_no_scenario_took(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "  - name: small\n    input: {amount: 5}\n"
        "  - name: decided\n    input: {amount: 500}\n"
        "    timeline: [{at: 1h, signal: decision}]\n",
    )
    report = run_files([path], coverage=True)
    cov = report.coverage.flows["approval"]
    assert cov.untaken() == ["decision -on_timeout-> escalate", "escalate -next-> archive"]
    assert round(cov.percent) == 75
    doc = report.coverage.document()["flows"]["approval"]
    assert (doc["edges_taken"], doc["edges_total"]) == (6, 8)
    assert doc["nodes"]["escalate"] == 0 and doc["nodes"]["decision"] == 1
    assert doc["file"].endswith("approval.yaml")


def test_a_file_that_does_not_load_is_an_error_and_the_others_still_run(tmp_path: Path) -> None:
    good = write(tmp_path, "  - name: small\n    input: {amount: 5}\n")
    bad = tmp_path / "bad.scenarios.yaml"
    bad.write_text(
        "wiggle_test: 1\nflow: approval.yaml\nscenarios: [{name: a, timeline: [{signal: nope}]}]\n"
    )
    report = run_files([bad, good])
    assert len(report.errors) == 1 and report.passed == 3
    assert str(report.errors[0].diagnostics[0]).endswith(
        ":3:43: flow 'approval' never awaits signal 'nope' (it awaits: decision)"
    )
    assert "3 passed, 1 error in" in closing_line(report)


def test_targets_find_scenario_files_beside_flows_in_folders_and_below_directories(
    tmp_path: Path,
) -> None:
    (tmp_path / "f.yaml").write_text(FLOW)
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "scenarios" / "f.scenarios.yaml").write_text("x")
    (tmp_path / "g.yaml").write_text(FLOW)
    files, problems = find_scenario_files(
        [str(tmp_path / "f.yaml"), str(tmp_path), str(tmp_path / "g.yaml")]
    )
    assert files == [tmp_path / "scenarios" / "f.scenarios.yaml"]
    assert problems == [
        f"{tmp_path / 'g.yaml'}: no scenario file for it (expected g.scenarios.yaml beside it "
        "or in a scenarios/ folder beside it)"
    ]


def test_run_to_end_false_checks_where_the_timeline_left_the_instance(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "  - name: still-waiting\n    input: {amount: 500}\n    run_to_end: false\n"
        "    timeline: [{advance: 1d}]\n"
        "    expect: {status: RUNNING, waiting_at: [decision], skips: [escalate]}\n"
        "  - name: cancelled\n    input: {amount: 500}\n"
        "    timeline: [{at: 1h, cancel: changed my mind}]\n"
        "    expect: {status: CANCELLED, reason: changed my mind}\n",
    )
    runs = run_files([path]).runs
    assert [r.problems for r in runs] == [[]] * 6
    assert runs[0].status == "RUNNING" and runs[3].status == "CANCELLED"


def test_a_json_scenario_file_with_results_merged_into_a_combine(tmp_path: Path) -> None:
    (tmp_path / "fan.yaml").write_text(
        "wiggle: 1\nname: fan\nsteps:\n  - parallel:\n      a: [{task: left}]\n"
        "      b: [{task: right}]\n    combine: merge\n"
    )
    (tmp_path / "fan.scenarios.json").write_text(
        '{"wiggle_test": 1, "flow": "fan.yaml", "scenarios": [{"name": "merged",'
        ' "input": {"id": 7}, "activities": {"left": 1, "right": {"returns": [2]},'
        ' "merge": {"merge": {"done": true}}},'
        ' "expect": {"context": {"id": 7, "done": true}, "calls": {"merge": 1}}}]}'
    )
    files, _ = find_scenario_files([str(tmp_path / "fan.yaml")])
    runs = run_files(files).runs
    assert [r.passed for r in runs] == [True, True, True], runs[0].problems
    assert runs[0].path == ["parallel-1", "left", "right", "parallel-1.join"]
