"""scripts/setup.sh: the demo's set-up fetches nothing the demo does not run.

The script runs in a copy of the checkout whose virtual environment is already current, with
`go`, `mvn` and `dot` stand-ins on PATH that note each call: the full set-up downloads the Go
modules and the Maven artifacts, the demo's (`--demo`, which scripts/demo.sh uses) neither.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts/setup.sh", root / "scripts/setup.sh")
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    for sdk_file in ("sdk/go/go.mod", "sdk/java/pom.xml"):
        (root / sdk_file).parent.mkdir(parents=True)
        shutil.copy(ROOT / sdk_file, root / sdk_file)
    # A virtual environment installed from this pyproject.toml already (setup.sh's stamp).
    (root / ".venv/bin").mkdir(parents=True)
    (root / ".venv/bin/python").symlink_to(shutil.which("true") or "/bin/true")
    digest = hashlib.sha1((root / "pyproject.toml").read_bytes()).hexdigest()[:12]
    (root / f".venv/.wiggle-{digest}").touch()
    return root


def _run(checkout: Path, tmp_path: Path, *args: str) -> list[str]:
    calls = tmp_path / "calls"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in ("go", "mvn", "dot", "openssl", "chromium", "chromedriver"):
        stand_in = bin_dir / tool
        stand_in.write_text(f'#!/bin/sh\necho "{tool} $*" >> "{calls}"\n')
        stand_in.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "MAVEN_REPO": str(tmp_path)}
    done = subprocess.run(
        ["bash", "scripts/setup.sh", *args],
        cwd=checkout, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return calls.read_text().splitlines() if calls.exists() else []


def test_the_full_set_up_fetches_the_sdks_dependencies(checkout: Path, tmp_path: Path) -> None:
    calls = _run(checkout, tmp_path)
    assert "go mod download" in calls
    assert any(c.startswith("mvn ") and "dependency:go-offline" in c for c in calls)


def test_the_demo_set_up_fetches_nothing_for_go_or_java(checkout: Path, tmp_path: Path) -> None:
    assert _run(checkout, tmp_path, "--demo") == []
    assert "bash scripts/setup.sh --demo" in (ROOT / "scripts/demo.sh").read_text()
