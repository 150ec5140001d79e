"""A zombie worker: stopped (SIGSTOP) inside a step past its lease, then continued (SIGCONT).

Its lease expired meanwhile and another worker ran the step again and went on. The zombie's
late heartbeats and reports must all be refused: the result that counts is the live worker's.
"""

from __future__ import annotations

import signal

import pytest
from faultkit import deploy, linear_flow, read_ledger, read_stats, scale, start_many, wait_until

pytestmark = [
    pytest.mark.timeout(300),
    # The same rule, in scripts/test.sh: the corpus case crash/pause-lease-expiry freezes the
    # worker past its lease, with every SDK's worker, in every mode, on both databases.
    pytest.mark.full_only("tests/conformance/test_corpus.py: crash/pause-lease-expiry"),
]


@pytest.mark.parametrize("mode", ["SERVER", "LOCAL_ASYNC"])
def test_a_zombie_workers_reports_are_refused(cluster, checker, ledger, mode):
    _, address = cluster.server()
    (flow,) = deploy(
        address, linear_flow(f"zombie-{mode.lower()}", mode, steps=3, timeout="1500ms")
    )
    n = scale(4, 16)
    zombie = cluster.worker(address, concurrency=n)
    ids = start_many(address, flow, [{"pause": {"s1": 1.0}}] * n)

    def zombie_inside_s1() -> bool:
        inside = {e.instance for e in read_ledger(cluster.ledger) if e.key == "s1#0"}
        return inside >= set(ids)

    wait_until(zombie_inside_s1, 60, "the zombie inside s1 of every instance")
    zombie.signal(signal.SIGSTOP)
    live = cluster.worker(address, concurrency=8)
    finished = checker.wait_finished(ids, timeout=scale(60, 120))
    zombie.signal(signal.SIGCONT)
    wait_until(
        lambda: read_stats(cluster.stats)["refused:STALE_LEASE"] >= 1,
        60,
        "the zombie's stale heartbeat or report refused",
    )
    contexts = checker.contexts(ids)
    tally = checker.tally(
        f"zombie worker (SIGSTOP past lease), {mode}",
        ids,
        cluster.ledger,
        cluster.stats,
        fault=f"SIGSTOP {n} leases, SIGCONT after expiry",
    )
    ledger(tally)
    assert set(finished.values()) == {"COMPLETED"}
    assert tally.stale_refused >= 1
    for ctx, _reason in contexts.values():
        assert ctx["by"]["s1"] == live.pid, ctx  # the live worker's result, not the zombie's
