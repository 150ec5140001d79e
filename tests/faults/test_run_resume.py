"""`wiggle run` on SQLite killed (-9) mid-instance, then run again with the same `--id` and
database: the second run resumes the instance (its steps picked up once the dead process's
leases and leader row lapse) and finishes it, re-running at most what was not committed."""

from __future__ import annotations

import sys

import pytest
from faultkit import (
    FULL,
    HERE,
    MODES,
    Checker,
    Proc,
    linear_flow,
    read_ledger,
    reexecuted_keys,
    wait_until,
)

pytestmark = pytest.mark.timeout(300)

SEGMENTS = ({"s0#0", "s1#0", "s2#0"}, {"s3#0", "s4#0", "s5#0"})


@pytest.mark.parametrize("mode", MODES if FULL else ["LOCAL_ASYNC", "SERVER"])
def test_wiggle_run_kill9_and_resume(tmp_path, ledger, mode):
    flow = tmp_path / "flow.yaml"
    flow.write_text(linear_flow("resume", mode, steps=6, timeout="2s"))
    database = f"sqlite:///{tmp_path / 'wiggle.db'}"
    ledger_file = tmp_path / "ledger.txt"
    args = [
        sys.executable,
        "-m",
        "wiggle",
        "run",
        str(flow),
        "--handlers",
        str(HERE / "fault_handlers.py"),
        "--input",
        '{"sleep": 0.3}',
        "--database",
        database,
        "--id",
        "resume-1",
    ]
    env = {"WIGGLE_FAULT_LEDGER": str(ledger_file)}
    first = Proc(args, env=env)
    wait_until(lambda: len(read_ledger(ledger_file)) >= 3, 60, "three steps run")
    assert first.kill9() == -9
    done_before = len(read_ledger(ledger_file))
    second = Proc(args, env=env)
    assert second.proc.wait(120) == 0, second.output()
    second.wait_for("resumed")
    second.wait_for("COMPLETED")

    checker = Checker(database)
    try:
        tally = checker.tally(
            f"wiggle run kill -9 + resume (SQLite), {mode}",
            ["resume-1"],
            ledger_file,
            fault=f"kill -9 after {done_before} executions",
        )
    finally:
        checker.close()
    ledger(tally)
    again = reexecuted_keys(ledger_file, "resume-1")
    if mode == "LOCAL_ASYNC":
        assert any(again <= segment for segment in SEGMENTS), again
    else:
        assert len(again) <= 1, again
