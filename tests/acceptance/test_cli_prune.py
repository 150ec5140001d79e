"""`wiggle prune` and `wiggle server --retention` as subprocesses, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from sqlalchemy import update

from wiggle.compiler import load_flow
from wiggle.engine import Engine, InstanceStatus
from wiggle.engine.store import schema as s

DAY_MS = 86_400_000
GATE = "wiggle: 1\nname: gate\nsteps:\n  - await: go\n"


def _wiggle(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WIGGLE_")}
    return subprocess.run(
        [sys.executable, "-m", "wiggle", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def _history(url: str) -> tuple[list[str], str]:
    """Three instances cancelled ten days ago and one still running."""
    engine = Engine(url)
    try:
        engine.register(load_flow(GATE))
        old = [engine.start("gate", {}).instance_id for _ in range(3)]
        for iid in old:
            engine.cancel(iid, "test")
        running = engine.start("gate", {}).instance_id
        i = s.instances
        engine.db.write(
            lambda c: c.execute(update(i).values(updated_at_ms=i.c.updated_at_ms - 10 * DAY_MS))
        )
        return old, running
    finally:
        engine.close()


@pytest.mark.postgres_too
def test_prune_dry_run_then_prune(database_url):
    _, running = _history(database_url)

    dry = _wiggle("prune", "--finished-before", "7d", "--database", database_url, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith("would remove 3 finished instances")

    done = _wiggle(
        "prune", "--finished-before", "7d", "--database", database_url, "--json", "--batch", "2"
    )
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert (got["instances"], got["signals"], got["dry_run"]) == (3, 0, False)
    assert got["events"] >= 6

    engine = Engine(database_url)
    try:
        assert engine.describe(running).status is InstanceStatus.RUNNING
        assert [v.instance_id for v in engine.list_instances()] == [running]
    finally:
        engine.close()


def test_prune_refuses_bad_input_without_a_traceback(tmp_path):
    bad = _wiggle("prune", "--finished-before", "7 days", "--database", f"sqlite:///{tmp_path}/x")
    assert bad.returncode == 1
    assert "--finished-before: '7 days' is not a duration" in bad.stderr
    assert "Traceback" not in bad.stderr

    missing = _wiggle("prune", "--finished-before", "7d", "--database", f"sqlite:///{tmp_path}/x")
    assert missing.returncode == 1
    assert "no SQLite database at" in missing.stderr
    assert not (tmp_path / "x").exists()

    server = _wiggle("server", "--retention", "0d", "--database", f"sqlite:///{tmp_path}/y")
    assert server.returncode == 1
    assert "--retention: duration '0d' must be greater than zero" in server.stderr
    assert "Traceback" not in server.stderr
    assert not (tmp_path / "y").exists()
