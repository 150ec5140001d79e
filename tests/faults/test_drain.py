"""SIGTERM drains under load with `max_attempts: 1`: a drained worker strands nothing.

Every step may run once only, so a task claimed by a poll the drain cut short, or a run given up
without handing back, would show as a FAILED instance ("lease expired"). Workers are stopped one
after another while instances of every mode flow through them, and replaced.
"""

from __future__ import annotations

import json
import signal

import pytest
from faultkit import MODES, deploy, executions_so_far, linear_flow, scale, start_many, wait_until

pytestmark = pytest.mark.timeout(400)


def test_sigterm_under_load_fails_nothing(cluster, checker, ledger):
    _, address = cluster.server()
    flows = deploy(
        address,
        *(linear_flow(f"drain-{m.lower()}", m, steps=6, timeout="3s", attempts=1) for m in MODES),
    )
    workers = [cluster.worker(address, concurrency=6) for _ in range(3)]
    n = scale(90, 300)
    ids: list[str] = []
    for i, flow in enumerate(flows):
        ids += start_many(address, flow, [{"sleep": 0.2}] * (n // len(flows) + (i == 0)))
    total = len(ids) * 6
    drains = scale(3, 8)
    for k in range(1, drains + 1):
        # Spread over the load: the k-th SIGTERM once k / (drains + 1) of the steps have run.
        wait_until(
            lambda k=k: executions_so_far(cluster.ledger) >= total * k // (drains + 1),
            120,
            f"{k}/{drains + 1} of the steps run",
        )
        victim = workers.pop(0)
        victim.signal(signal.SIGTERM)
        assert victim.proc.wait(60) == 0, victim.output()
        victim.wait_for("^drained")
        workers.append(cluster.worker(address, concurrency=6))
    checker.wait_finished(ids, timeout=scale(120, 400))

    given_back = [
        e
        for e in checker.events(ids, ["handed_back"])
        if json.loads(e.detail or "{}").get("reason") == "shutdown"
    ]
    tally = checker.tally(
        "SIGTERM drain, max_attempts 1",
        ids,
        cluster.ledger,
        cluster.stats,
        fault=f"{drains} SIGTERMs, {len(given_back)} handed back on shutdown",
    )
    ledger(tally)
    assert tally.reexec == dict.fromkeys(MODES, 0), tally.reexec  # a drain re-runs nothing
