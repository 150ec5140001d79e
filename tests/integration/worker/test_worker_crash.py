"""A worker process killed (SIGKILL) or stopped (SIGTERM) mid-run, under each execution mode.

The activities of `crash_worker.py` append one line per execution to a log file, so executions
are counted across processes. Steps have a 2 s timeout (the lease) and a 50 ms retry delay, so a
dead worker's lease expires and its task is redelivered quickly. The slow step (1 s) is the
window in which the first worker is killed or stopped; it fits in its lease, so these tests do
not depend on heartbeats (test_worker_heartbeat covers those).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(180)

SCRIPT = Path(__file__).with_name("crash_worker.py")
INSTANCES = 3
STEPS = ["s0", "s1", "s2", "s3", "slow4", "s5"]

FLOW = """
wiggle: 1
name: crashy
execution: {mode}
steps:
  - {{task: s0, timeout: 2s, retry: {{initial: 50ms}}}}
  - {{task: s1, timeout: 2s, retry: {{initial: 50ms}}}}
  - {{task: s2, timeout: 2s, retry: {{initial: 50ms}}, checkpoint: true}}
  - {{task: s3, timeout: 2s, retry: {{initial: 50ms}}}}
  - {{task: slow4, timeout: 2s, retry: {{initial: 50ms}}}}
  - {{task: s5, timeout: 2s, retry: {{initial: 50ms}}}}
"""


def spawn(address: str, log: Path, slow_s: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), address, str(log), str(slow_s)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        proc.kill()
        proc.communicate()
        pytest.fail("the worker process did not start")
    return proc


def executions(log: Path) -> Counter[tuple[str, str]]:
    if not log.exists():
        return Counter()
    counts: Counter[tuple[str, str]] = Counter()
    for line in log.read_text().splitlines():
        instance, node, _attempt, _pid = line.split()
        counts[(instance, node)] += 1
    return counts


def run_until_slow_step(
    stack, wait_until, mode: str, log: Path
) -> tuple[subprocess.Popen[str], list[str]]:
    flow = stack.deploy(FLOW.format(mode=mode))
    first = spawn(stack.address, log, slow_s=1.0)
    ids = [
        stack.client.start(flow.name, {}, version=flow.version).instance_id
        for _ in range(INSTANCES)
    ]
    wait_until(
        lambda: all(executions(log)[(i, "slow4")] >= 1 for i in ids),
        timeout=30,
        what="every instance inside its slow step",
    )
    return first, ids


def finish_with_second_worker(stack, log: Path, ids: list[str]) -> None:
    second = spawn(stack.address, log, slow_s=0.05)
    try:
        for instance_id in ids:
            view = stack.wait_finished(instance_id, timeout=60)
            assert view.status == "COMPLETED", view.reason
            assert view.context == dict.fromkeys(STEPS, 1)
    finally:
        second.send_signal(signal.SIGTERM)
        second.communicate(timeout=20)


@pytest.mark.parametrize("mode", ["SERVER", "LOCAL_SYNC", "LOCAL_ASYNC"])
def test_sigkill_mid_run_reruns_at_most_what_was_not_committed(stack, wait_until, tmp_path, mode):
    log = tmp_path / "executions.log"
    first, ids = run_until_slow_step(stack, wait_until, mode, log)
    os.kill(first.pid, signal.SIGKILL)
    first.communicate(timeout=10)  # reaps it and closes its pipe
    finish_with_second_worker(stack, log, ids)

    counts = executions(log)
    reruns = []
    for instance_id in ids:
        per_step = {node: counts[(instance_id, node)] for node in STEPS}
        assert all(1 <= n <= 2 for n in per_step.values()), per_step
        rerun = {node for node, n in per_step.items() if n > 1}
        reruns.append(rerun)
        # An instance that got past its slow step before the kill (a slow machine) re-runs
        # nothing; one killed inside it re-runs exactly what was not committed yet.
        if mode in ("SERVER", "LOCAL_SYNC"):
            # Every step was committed before the next ran: only the step in flight re-runs.
            assert rerun in (set(), {"slow4"}), per_step
        else:
            # The checkpoint at s2 committed s0..s2; the unflushed run (s3, slow4) re-runs.
            assert rerun in (set(), {"s3", "slow4"}), per_step
    assert any(reruns), "the kill landed inside no run"


@pytest.mark.parametrize("mode", ["SERVER", "LOCAL_SYNC", "LOCAL_ASYNC"])
def test_sigterm_drains_and_loses_nothing(stack, wait_until, tmp_path, mode):
    log = tmp_path / "executions.log"
    first, ids = run_until_slow_step(stack, wait_until, mode, log)
    first.send_signal(signal.SIGTERM)
    out, _ = first.communicate(timeout=30)
    assert first.returncode == 0
    assert "drained" in out
    finish_with_second_worker(stack, log, ids)

    counts = executions(log)
    for instance_id in ids:
        per_step = {node: counts[(instance_id, node)] for node in STEPS}
        assert per_step == dict.fromkeys(STEPS, 1), per_step
    if mode != "SERVER":
        # The runs caught by the drain handed back saying so.
        reasons = [
            e.detail.get("reason")
            for instance_id in ids
            for e in stack.client.describe(instance_id, events=True).events
            if e.kind == "handed_back"
        ]
        assert "shutdown" in reasons, reasons
