"""`wiggle test` and `wiggle render --coverage` driven as a subprocess, as a user would run them."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from clikit import cli_env

ROOT = Path(__file__).resolve().parents[2]

CLOSING = re.compile(r"^=+ (?P<summary>.+) in \d+\.\d\ds =+$")


def wiggle(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "wiggle", *args],
        cwd=cwd,
        env=cli_env(**(env or {})),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture
def definitions(tmp_path: Path) -> Path:
    """A copy of definitions/, so a test may add scenario files to it."""
    shutil.copytree(ROOT / "definitions", tmp_path / "definitions")
    return tmp_path


WRONG = """\
wiggle_test: 1
flow: ../customer-onboarding.yaml
handlers: ../handlers/customer_onboarding.py
scenarios:
  - name: wrong-path
    input_file: ../samples/customer-onboarding.json
    timeline: [{signal: kyc_result, payload: {status: approved}}]
    expect:
      path: [create_account, request_kyc, kyc_result, kyc_approved, close_account]
"""


def test_a_flow_runs_its_scenarios_one_line_each_then_pytests_closing_line(
    definitions: Path,
) -> None:
    done = wiggle("test", "definitions/customer-onboarding.yaml", cwd=definitions)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout.splitlines()
    assert out[0] == (
        "definitions/scenarios/customer-onboarding.scenarios.yaml::approved[SERVER] PASSED"
    )
    assert len([line for line in out if line.endswith(" PASSED")]) == 18
    assert CLOSING.match(out[-1]).group("summary") == "18 passed"
    assert done.stderr == ""


def test_a_wrong_scenario_fails_showing_both_paths_and_exits_1(definitions: Path) -> None:
    (definitions / "definitions" / "scenarios" / "wrong.scenarios.yaml").write_text(WRONG)
    done = wiggle("test", "definitions/scenarios/wrong.scenarios.yaml", cwd=definitions)
    assert done.returncode == 1
    out = done.stdout
    assert "wrong.scenarios.yaml::wrong-path[LOCAL_ASYNC] FAILED" in out
    assert "path differs at step 5: expected 'close_account', took 'activate_account'" in out
    assert (
        "expected path: [create_account, request_kyc, kyc_result, kyc_approved, close_account]"
    ) in out
    assert (
        "actual path:   [create_account, request_kyc, kyc_result, kyc_approved, "
        "activate_account, send_welcome_email]"
    ) in out
    assert CLOSING.match(out.splitlines()[-1]).group("summary") == "3 failed"


def test_json_is_one_document_with_every_result(definitions: Path) -> None:
    done = wiggle(
        "test", "definitions/payment-saga.yaml", "--json", "--mode", "SERVER", cwd=definitions
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["summary"]["passed"] == 6 and doc["summary"]["failed"] == 0
    first = doc["results"][0]
    assert (first["scenario"], first["mode"], first["outcome"]) == (
        "paid-and-shipped",
        "SERVER",
        "passed",
    )
    assert first["path"][:3] == ["create_payment_intent", "hold_inventory", "charge_card"]


def test_a_scenario_file_that_does_not_load_is_reported_at_its_place(definitions: Path) -> None:
    bad = WRONG.replace("signal: kyc_result", "signal: kyc_reslt")
    (definitions / "definitions" / "scenarios" / "wrong.scenarios.yaml").write_text(bad)
    done = wiggle("test", "definitions/scenarios/wrong.scenarios.yaml", cwd=definitions)
    assert done.returncode == 1
    assert (
        "definitions/scenarios/wrong.scenarios.yaml:7:25: flow 'customer-onboarding' never "
        "awaits signal 'kyc_reslt' (it awaits: compliance_decision, kyc_result)"
    ) in done.stdout
    assert "Traceback" not in done.stdout + done.stderr
    assert CLOSING.match(done.stdout.splitlines()[-1]).group("summary") == "1 error"


def test_a_target_without_scenarios_is_a_usage_error(definitions: Path) -> None:
    done = wiggle("test", "definitions/v2/order-fulfilment.yaml", cwd=definitions)
    assert done.returncode == 2
    assert "no scenario file for it" in done.stderr


def test_coverage_is_written_and_rendered_with_untaken_edges_marked(definitions: Path) -> None:
    done = wiggle(
        "test",
        "definitions/order-fulfilment.yaml",
        "-k",
        "shipped",
        "--coverage",
        "--fail-under",
        "100",
        cwd=definitions,
    )
    assert done.returncode == 1  # one scenario leaves the filter's false edge untaken
    assert "untaken: in_stock -filtered-> (filtered)" in done.stdout
    assert "coverage under 100% for at least one flow" in done.stdout
    report = definitions / "wiggle-coverage.json"
    flows = json.loads(report.read_text())["flows"]
    assert flows["order-fulfilment"]["edges"]["in_stock -filtered-> (filtered)"] == 0
    drawn = wiggle(
        "render",
        "definitions/order-fulfilment.yaml",
        "--coverage",
        str(report),
        "-o",
        "cov.dot",
        cwd=definitions,
    )
    assert drawn.returncode == 0, drawn.stderr
    dot = (definitions / "cov.dot").read_text()
    assert dot.count("· untaken") == 1 and 'label="false · untaken"' in dot
    assert "coverage: 10/11 edges taken" in dot


def test_render_refuses_a_coverage_report_of_another_version(definitions: Path) -> None:
    wiggle("test", "definitions/order-fulfilment.yaml", "--coverage", cwd=definitions)
    flow = definitions / "definitions" / "order-fulfilment.yaml"
    flow.write_text(flow.read_text().replace("  - task: notify\n", "  - task: notify_all\n"))
    done = wiggle(
        "render", str(flow), "--coverage", "wiggle-coverage.json", "-o", "x.svg", cwd=definitions
    )
    assert done.returncode == 2
    assert "run `wiggle test --coverage` again" in done.stderr
