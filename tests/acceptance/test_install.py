"""Installing the package is quiet: setuptools has nothing to warn about in pyproject.toml (a
first install used to print some 175 lines of deprecation and data-directory warnings)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(300)
def test_building_the_package_warns_of_nothing_and_ships_its_data(tmp_path: Path) -> None:
    # A copy of what the build reads: a build leaves build/ and *.egg-info beside its source.
    source = tmp_path / "src"
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for tree in ("wiggle", "tools/render"):
        shutil.copytree(ROOT / tree, source / tree, ignore=skip)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation",
         "--wheel-dir", str(tmp_path / "dist"), str(source)],
        capture_output=True, text=True, timeout=280,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    output = built.stdout + built.stderr
    assert "BuildBackendWarning" not in output and "SetuptoolsDeprecationWarning" not in output, [
        line for line in output.splitlines() if "Warning" in line
    ]
    (wheel,) = (tmp_path / "dist").glob("wiggle-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for data in (
        "wiggle/compiler/schema/flow.schema.json",
        "wiggle/console/templates/instance.html",
        "wiggle/console/static/console.js",
    ):
        assert data in names
