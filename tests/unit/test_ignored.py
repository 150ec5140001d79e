"""What running Wiggle or its tests leaves in a checkout is ignored by git: `wiggle run`'s
SQLite database with its write-ahead log and shared-memory files, the virtual environment, the
SDKs' build output."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "path",
    [
        "wiggle.db",
        "wiggle.db-wal",
        "wiggle.db-shm",
        "wiggle.db-journal",
        ".venv/bin/python",
        "build/lib/wiggle/__init__.py",
        "wiggle.egg-info/PKG-INFO",
        "sdk/go/bin/wiggle-conformance-worker",
        "sdk/java/target/wiggle-conformance-worker.jar",
    ],
)
def test_is_ignored(path: str) -> None:
    checked = subprocess.run(
        ["git", "check-ignore", "--no-index", "-q", path], cwd=ROOT, check=False
    )
    assert checked.returncode == 0, f"{path} is not ignored by .gitignore"
