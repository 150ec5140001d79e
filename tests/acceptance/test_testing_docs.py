"""docs/testing.md's walkthrough runs: its scenario blocks, in order, are a scenario file that
`wiggle test` passes; its deliberately wrong scenario fails with the output the page shows; and
every block is part of the shipped definitions/scenarios/customer-onboarding.scenarios.yaml.
Its Python runs too: the FlowTest block, then the flow_test block as a pytest file beside the
flow (pytest in a subprocess, so the fixture comes from the installed plugin).

A block belongs to the walkthrough when the line before its ```yaml fence is
`<!-- walkthrough -->` (`<!-- walkthrough: fails -->` for the wrong one, whose output is the
next ```text block).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from clikit import cli_env

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "testing.md"
SHIPPED = ROOT / "definitions" / "scenarios" / "customer-onboarding.scenarios.yaml"
TARGET = "definitions/scenarios/customer-onboarding.scenarios.yaml"

_BLOCK = re.compile(r"<!-- walkthrough(?P<fails>: fails)? -->\n```yaml\n(?P<body>.*?)```", re.S)
_TEXT = re.compile(r"```text\n(?P<body>.*?)```", re.S)
_PYTHON = re.compile(r"```python\n(?P<body>.*?)```", re.S)


def walkthrough() -> tuple[list[str], str, str]:
    text = DOC.read_text()
    passing, failing, shown = [], "", ""
    for found in _BLOCK.finditer(text):
        if found.group("fails"):
            failing = found.group("body")
            shown = _TEXT.search(text, found.end()).group("body")  # type: ignore[union-attr]
        else:
            passing.append(found.group("body"))
    return passing, failing, shown


def wiggle_test(cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "wiggle", "test", "definitions/customer-onboarding.yaml"],
        cwd=cwd,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_walkthrough_is_the_shipped_file() -> None:
    passing, failing, _ = walkthrough()
    assert len(passing) == 5 and failing
    shipped = SHIPPED.read_text()
    for block in passing:
        assert block in shipped, f"not in {SHIPPED.name}:\n{block}"


def test_the_walkthrough_runs_and_its_wrong_scenario_fails_as_shown(tmp_path: Path) -> None:
    passing, failing, shown = walkthrough()
    shutil.copytree(ROOT / "definitions", tmp_path / "definitions")
    target = tmp_path / TARGET
    target.write_text("".join(passing))
    done = wiggle_test(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].strip("= ").startswith("12 passed in ")

    target.write_text("".join(passing) + failing)
    done = wiggle_test(tmp_path)
    assert done.returncode == 1
    assert done.stdout.splitlines()[-1].strip("= ").startswith("3 failed, 12 passed in ")
    out = done.stdout.splitlines()
    for line in shown.splitlines():
        assert line in out, f"the page shows a line wiggle test does not print:\n{line}"


def test_the_python_examples_run(tmp_path: Path) -> None:
    flowtest, fixture = [m.group("body") for m in _PYTHON.finditer(DOC.read_text())]
    shutil.copytree(ROOT / "definitions", tmp_path / "definitions")
    (tmp_path / "definitions" / "test_example.py").write_text(flowtest + "\n" + fixture)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_example.py"],
        cwd=tmp_path / "definitions",
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].startswith("1 passed")  # the module ran, then the test
