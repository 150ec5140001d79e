"""A worker killed (-9) under load, in each execution mode: nothing lost, and what re-runs stays
within the documented bound: the step in flight (SERVER, LOCAL_SYNC), the steps since the last
flush (LOCAL_ASYNC, which flushes after the `checkpoint` step s2)."""

from __future__ import annotations

import pytest
from faultkit import (
    MODES,
    deploy,
    executions_so_far,
    linear_flow,
    reexecuted_keys,
    scale,
    start_many,
    wait_until,
)

pytestmark = pytest.mark.timeout(300)

STEPS = 6
SEGMENTS = ({"s0#0", "s1#0", "s2#0"}, {"s3#0", "s4#0", "s5#0"})


# The same rule, in scripts/test.sh: a worker killed mid-run re-runs at most what was not
# committed (tests/integration/worker/test_worker_crash.py, every mode, both databases; the
# corpus's crash/kill-* cases with every SDK). The short suite keeps LOCAL_ASYNC, the loosest
# bound, under load here.
_COVERED = "tests/integration/worker/test_worker_crash.py"


@pytest.mark.parametrize(
    "mode",
    [
        m if m == "LOCAL_ASYNC" else pytest.param(m, marks=pytest.mark.full_only(_COVERED))
        for m in MODES
    ],
)
def test_worker_kill9_reruns_within_the_bound(cluster, checker, ledger, mode):
    _, address = cluster.server()
    (flow,) = deploy(address, linear_flow(f"kill-{mode.lower()}", mode, steps=STEPS))
    n = scale(16, 120)
    first = cluster.worker(address, concurrency=8)
    ids = start_many(address, flow, [{"sleep": 0.05}] * n)
    wait_until(
        lambda: executions_so_far(cluster.ledger) >= n * STEPS // 3, 120, "a third of the steps"
    )
    assert first.kill9() == -9
    cluster.worker(address, concurrency=8)
    checker.wait_finished(ids, timeout=scale(90, 300))

    expired = len(checker.events(ids, ["lease_expired"]))
    tally = checker.tally(
        f"worker kill -9, {mode}",
        ids,
        cluster.ledger,
        cluster.stats,
        fault=f"kill -9 mid-load, {expired} leases expired",
    )
    ledger(tally)
    assert expired >= 1, "the kill caught no step in flight"
    for instance in ids:
        again = reexecuted_keys(cluster.ledger, instance)
        if mode == "LOCAL_ASYNC":
            assert any(again <= segment for segment in SEGMENTS), (instance, again)
        else:
            assert len(again) <= 1, (instance, again)
