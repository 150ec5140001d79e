"""Scenario files refused at load, every problem at its FILE:LINE:COL, before anything runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from wiggle.errors import FlowError
from wiggle.testing import load_scenario_file

ROOT = Path(__file__).resolve().parents[3]

FLOW = """\
wiggle: 1
name: kyc
input: {type: object, required: [id]}
steps:
  - task: ask
  - await: answer
    timeout: 3d
  - filter: approved
"""


def problems(tmp_path: Path, text: str, *, handlers: str | None = None) -> list[str]:
    (tmp_path / "kyc.yaml").write_text(FLOW)
    if handlers is not None:
        (tmp_path / "h.py").write_text(handlers)
    path = tmp_path / "kyc.scenarios.yaml"
    path.write_text(text)
    with pytest.raises(FlowError) as caught:
        load_scenario_file(path)
    return [str(d).replace(str(path), "S") for d in caught.value.diagnostics]


HEAD = "wiggle_test: 1\nflow: kyc.yaml\nscenarios:\n"


def test_a_good_file_loads(tmp_path: Path) -> None:
    (tmp_path / "kyc.yaml").write_text(FLOW)
    path = tmp_path / "kyc.scenarios.yaml"
    path.write_text(
        HEAD + "  - name: yes\n    input: {id: 1}\n    activities: {approved: true}\n"
        "    timeline: [{at: 1h, signal: answer, payload: 1}, {advance: 2d}]\n"
        "    expect: {status: COMPLETED, path: [ask, answer, approved]}\n"
    )
    (scenario,) = load_scenario_file(path).scenarios
    assert [m.at_ms for m in scenario.timeline] == [3_600_000, None]
    assert scenario.timeline[1].advance_ms == 172_800_000


def test_names_the_flow_lacks_are_refused_where_they_are_written(tmp_path: Path) -> None:
    got = problems(
        tmp_path,
        HEAD
        + "  - name: bad\n"
        + "    input: {id: 1}\n"
        + "    activities: {aks: {returns: 1}}\n"
        + "    timeline: [{signal: anwser}]\n"
        + "    expect:\n"
        + "      path: [ask, answr]\n"
        + "      calls: {approve: 1}\n"
        + "      events: [{kind: timer_fired, node: nope}]\n",
    )
    assert got == [
        "S:6:18: flow 'kyc' has no activity 'aks' (did you mean 'ask'?)",
        "S:7:25: flow 'kyc' never awaits signal 'anwser' (it awaits: answer)",
        "S:9:19: flow 'kyc' has no node 'answr' (did you mean 'answer'?)",
        "S:10:15: flow 'kyc' has no activity 'approve' (did you mean 'approved'?)",
        "S:11:42: flow 'kyc' has no node 'nope'",
    ]


def test_a_malformed_duration_is_refused_by_the_schema_and_a_zero_one_by_the_checks(
    tmp_path: Path,
) -> None:
    got = problems(
        tmp_path,
        HEAD + "  - name: t\n    input: {id: 1}\n    timeline:\n"
        "      - advance: 3 days\n      - advance: 0s\n",
    )
    assert got == [
        "S:7:18: '3 days' is not a valid duration: write a whole number and a unit: "
        "250ms, 30s, 5m, 2h or 1d"
    ]
    got = problems(
        tmp_path, HEAD + "  - name: t\n    input: {id: 1}\n    timeline: [{advance: 0s}]\n"
    )
    assert got == ["S:6:26: duration '0s' must be greater than zero"]


def test_time_never_goes_back_and_an_entry_does_one_thing(tmp_path: Path) -> None:
    got = problems(
        tmp_path,
        HEAD + "  - name: t\n    input: {id: 1}\n    timeline:\n"
        "      - advance: 2h\n      - at: 1h\n        signal: answer\n"
        "      - {advance: 1h, cancel: no}\n",
    )
    assert got == [
        "S:8:13: at 1h is before the time the timeline already reached (2h after the start)",
        "S:10:9: a timeline entry does one thing; found advance, cancel",
    ]


def test_inputs_are_checked_against_the_flow_and_names_are_unique(tmp_path: Path) -> None:
    got = problems(
        tmp_path,
        HEAD + "  - name: t\n    input: {name: x}\n  - name: t\n    input: {id: 2}\n",
    )
    assert got == [
        "S:5:12: input does not satisfy flow 'kyc': 'id' is a required property",
        "S:6:11: scenario 't' is already defined on line 4",
    ]


def test_results_say_one_thing_and_the_handler_needs_a_handlers_file(tmp_path: Path) -> None:
    got = problems(
        tmp_path,
        HEAD + "  - name: t\n    input: {id: 1}\n    activities:\n"
        "      ask: [{returns: 1, fail: x}, {handler: true}, {returns: 1, non_retryable: true}]\n",
    )
    assert got == [
        "S:7:13: a result needs exactly one of returns, merge, fail, handler; found returns, fail",
        "S:7:37: 'handler: true' needs a `handlers:` file",
        "S:7:66: 'non_retryable' goes with 'fail' only",
    ]


def test_a_missing_flow_and_handlers_that_do_not_import(tmp_path: Path) -> None:
    path = tmp_path / "x.scenarios.yaml"
    path.write_text("wiggle_test: 1\nflow: nowhere.yaml\nscenarios: [{name: a}]\n")
    with pytest.raises(FlowError) as caught:
        load_scenario_file(path)
    (only,) = caught.value.diagnostics
    assert (only.line, only.column) == (2, 7)
    assert only.message.startswith("flow file nowhere.yaml does not exist")
    got = problems(
        tmp_path,
        "wiggle_test: 1\nflow: kyc.yaml\nhandlers: h.py\nscenarios: [{name: a, input: {id: 1}}]\n",
        handlers="raise RuntimeError('no database here')\n",
    )
    assert got == ["S:3:11: importing handlers h.py raised RuntimeError: no database here"]


def test_unknown_keys_and_a_wrong_format_version(tmp_path: Path) -> None:
    got = problems(
        tmp_path, "wiggle_test: 2\nflow: kyc.yaml\nscenarios:\n  - name: a\n    inputs: {}\n"
    )
    assert got[0] == "S:1:14: format version must be 1"
    assert got[1].startswith("S:5:5: unknown key 'inputs' (expected one of: activities,")


def test_the_flow_files_own_problems_are_located_in_the_flow(tmp_path: Path) -> None:
    (tmp_path / "broken.yaml").write_text("wiggle: 1\nname: b\nsteps:\n  - tsk: a\n")
    path = tmp_path / "b.scenarios.yaml"
    path.write_text("wiggle_test: 1\nflow: broken.yaml\nscenarios: [{name: a}]\n")
    with pytest.raises(FlowError) as caught:
        load_scenario_file(path)
    assert all(d.file.endswith("broken.yaml") for d in caught.value.diagnostics)


def test_the_packaged_schema_is_the_spec_and_valid_draft_2020_12() -> None:
    spec = ROOT / "spec" / "schema" / "scenario.schema.json"
    packaged = ROOT / "wiggle" / "testing" / "schema" / "scenario.schema.json"
    assert packaged.read_bytes() == spec.read_bytes()
    Draft202012Validator.check_schema(json.loads(spec.read_text()))


def test_every_shipped_scenario_file_loads() -> None:
    files = sorted((ROOT / "definitions" / "scenarios").glob("*.scenarios.yaml"))
    assert len(files) == 10  # seven flows, three schedules
    for path in files:
        assert load_scenario_file(path).scenarios


def test_subflow_targets_are_found_beside_the_flow_or_named(tmp_path: Path) -> None:
    (tmp_path / "parent.yaml").write_text("wiggle: 1\nname: parent\nsteps:\n  - subflow: child\n")
    path = tmp_path / "parent.scenarios.yaml"
    path.write_text("wiggle_test: 1\nflow: parent.yaml\nscenarios: [{name: a}]\n")
    with pytest.raises(FlowError) as caught:
        load_scenario_file(path)
    (only,) = caught.value.diagnostics
    assert (only.line, only.column) == (2, 7)
    assert only.message == (
        f"{tmp_path / 'parent.yaml'}:4:14: subflow 'child' is not in `flows:` and there is no "
        "child.yaml beside the flow; list the file under `flows:`"
    )
    (tmp_path / "child.yaml").write_text("wiggle: 1\nname: child\nsteps:\n  - task: c\n")
    loaded = load_scenario_file(path)
    assert [f.name for f in loaded.flows] == ["child", "parent"]
