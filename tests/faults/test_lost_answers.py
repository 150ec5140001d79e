"""Lost answers to reports, in every mode, loops included: nothing is applied twice.

A server that commits a report and then answers UNAVAILABLE (as a reset connection or a server
dying after its commit would) makes the worker resend the report with the same seq; the resend
must get the first answer, never a second application. A loop batch that ends where it began
(`[more=true, inc]`) is the case a lease-and-node check alone cannot tell apart: `max_iterations`
equal to the target makes one double application fail the instance. Then the same through a
proxy that resets every connection every 0.2-0.6 s.
"""

from __future__ import annotations

import pytest
from acks import lost_acks
from faultkit import (
    MODES,
    ResettingProxy,
    deploy,
    linear_flow,
    loop_flow,
    read_ledger,
    read_stats,
    scale,
    start_many,
)

pytestmark = pytest.mark.timeout(300)

TARGET = 6


@pytest.mark.parametrize("mode", MODES)
def test_lost_answers_are_never_applied_twice(cluster, checker, ledger, mode):
    _, address = cluster.server(lose=0.15, seed=11, acks=True)
    loop, line = deploy(
        address,
        loop_flow(f"lost-loop-{mode.lower()}", mode, target=TARGET),
        linear_flow(f"lost-line-{mode.lower()}", mode, steps=4),
    )
    # Batches of two: a LOCAL_ASYNC loop reports [more, inc] batches that end where they began.
    cluster.worker(address, concurrency=8, batch=2)
    n = scale(12, 40)
    ids = start_many(address, loop, [{"target": TARGET}] * n)
    ids += start_many(address, line, [{}] * (n // 2))
    checker.wait_finished(ids, timeout=scale(120, 300))

    lost = read_stats(cluster.stats)["lost"]
    acked, unheld, again = lost_acks(cluster.stats, checker.sa)
    tally = checker.tally(
        f"lost answers, {mode}",
        ids,
        cluster.ledger,
        cluster.stats,
        fault=f"{lost} answers lost; {again} reports answered again; "
        f"{acked} acknowledged steps, {unheld} of them not held",
    )
    ledger(tally)
    assert lost >= 3, "too few answers were lost to prove anything"
    # Each resend is answered from what its first copy did, and every step answered "done" is
    # in the history (a resend must not be taken for the step its task reached since).
    assert again >= 1 and unheld == 0, tally.line()
    contexts = checker.contexts(ids[:n])
    assert all(ctx["n"] == TARGET for ctx, _reason in contexts.values()), contexts


def test_a_flaky_network_applies_nothing_twice(cluster, checker, ledger):
    _, address = cluster.server()
    proxy = ResettingProxy(address, 0.2, 0.6)
    try:
        flows = deploy(
            address,
            *(loop_flow(f"flaky-loop-{m.lower()}", m, target=TARGET) for m in MODES),
            *(linear_flow(f"flaky-line-{m.lower()}", m, steps=4) for m in MODES),
        )
        cluster.worker(proxy.address, concurrency=8, batch=2)
        n = scale(6, 20)
        loops: list[str] = []
        ids: list[str] = []
        for i, flow in enumerate(flows):
            started = start_many(address, flow, [{"target": TARGET, "sleep": 0.02}] * n)
            ids += started
            loops += started if i < len(MODES) else []
        checker.wait_finished(ids, timeout=scale(150, 400))
        resets = proxy.resets
    finally:
        proxy.close()
    tally = checker.tally(
        "flaky network (resets)", ids, cluster.ledger, cluster.stats, fault=f"{resets} resets"
    )
    ledger(tally)
    assert resets >= 3
    contexts = checker.contexts(loops)
    assert all(ctx["n"] == TARGET for ctx, _reason in contexts.values()), contexts


def test_a_lost_poll_answer_costs_an_attempt_never_the_step(cluster, checker, ledger):
    """A poll's answer lost after its commit leaves its tasks leased to a worker that never saw
    them: each lease expires (a failed attempt) and the step runs on its next attempt."""
    _, address = cluster.server(lose=0.5, lose_methods="PollTasks", seed=5)
    (flow,) = deploy(address, linear_flow("lost-poll", "SERVER", steps=3, timeout="1s"))
    cluster.worker(address, concurrency=4, batch=4)
    ids = start_many(address, flow, [{}] * scale(20, 60))
    checker.wait_finished(ids, timeout=scale(120, 300))
    expired = checker.events(ids, ["lease_expired"])
    lost = read_stats(cluster.stats)["lost"]
    tally = checker.tally(
        "lost poll answers",
        ids,
        cluster.ledger,
        cluster.stats,
        fault=f"{lost} poll answers lost; {len(expired)} leases expired",
    )
    ledger(tally)
    assert expired, "no poll that leased a task lost its answer: the fault did not fire"
    # Each step whose lease expired unseen ran on a later attempt.
    ran = read_ledger(cluster.ledger)
    for e in expired:
        assert any(
            (r.instance, r.node) == (e.instance_id, e.node_id) and r.attempt > e.attempt
            for r in ran
        ), f"{e.instance_id} {e.node_id}: attempt {e.attempt} expired and no later one ran"
