"""PostgreSQL failover under load: the primary killed -9, its synchronous standby promoted.

A primary and a streaming standby that acknowledges every COMMIT before the client hears of it
(pgpair.py: synchronous replication, both on this machine, pgserver's binaries). Two Wiggle servers
and two workers, all on the multi-host URL `?host=PRIMARY&host=STANDBY&
target_session_attrs=read-write`, under a steady load of starts (caller-chosen ids, retried until
answered) in every mode. Mid-load the primary's postmaster and every backend get SIGKILL; a second
later the standby is promoted, as a failover manager would. Nobody touches a server or a worker:
their connections to the dead primary fail, new ones find the promoted standby.

The ledger line: acknowledged starts lost (`lost`), acknowledged steps lost (a step the server
answered "done" for that the database no longer holds: acks.py), duplicated events, re-executions
(leases that ran out during the outage), and the outage the load saw (from the first start left
unanswered after the kill to the next one answered).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from acks import lost_acks
from faultkit import (
    MODES,
    Checker,
    Cluster,
    deploy,
    executions_so_far,
    linear_flow,
    loop_flow,
    scale,
    wait_until,
)
from pgpair import PostgresPair
from start_load import Load

# The short suite's failover is a real one: Patroni's (test_patroni.py); this hand-made one
# stays in the full suite for what it shows on its own, that a promotion done without a failover
# manager must let the promoted node commit without a synchronous standby (pgpair.py, promote).
pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.full_only("tests/faults/test_patroni.py::test_switchover_then_primary_killed"),
]

TARGET = 4


@pytest.fixture
def pair(tmp_path) -> Iterator[tuple[PostgresPair, Cluster, Checker]]:
    pg = PostgresPair()
    try:
        pg.create_database("wiggle_failover")
        url = pg.url("wiggle_failover")
        cluster = Cluster(url, tmp_path)
        checker = Checker(url)
        try:
            yield pg, cluster, checker
        finally:
            cluster.close()
            checker.close()
    finally:
        pg.close()


def test_primary_killed_and_standby_promoted_under_load(pair, ledger):
    pg, cluster, checker = pair
    _, a1 = cluster.server(node_id="s1", acks=True)
    _, a2 = cluster.server(node_id="s2", acks=True)
    flows = deploy(
        a1,
        *(loop_flow(f"fo-loop-{m.lower()}", m, target=TARGET, attempts=30) for m in MODES),
        *(linear_flow(f"fo-line-{m.lower()}", m, steps=4, attempts=30) for m in MODES),
    )
    cluster.worker(a1, concurrency=8, batch=2)
    cluster.worker(a2, concurrency=8, batch=2)
    load = Load([a1, a2], flows, {"target": TARGET}, prefix="fo")
    wait_until(lambda: len(load.acked) >= scale(20, 60), 120, "starts answered before the kill")
    wait_until(lambda: executions_so_far(cluster.ledger) >= 40, 120, "steps run before the kill")
    killed_at = time.monotonic()
    old = pg.crash_primary()
    # A failover manager promotes once it sees the primary gone: here, once a start is refused.
    wait_until(lambda: load.refused_since(killed_at), 60, "a start refused after the kill")
    promoted_at = pg.promote()
    wait_until(lambda: load.answered_since(promoted_at), 120, "a start answered after promotion")
    down_at, recovered_at = load.outage(killed_at)
    wait_until(
        lambda: len(load.answered_since(recovered_at)) >= scale(20, 100),
        120,
        "starts answered after the recovery",
    )
    ids = load.stop()
    checker.wait_finished(ids, timeout=scale(180, 400))

    acked, lost, again = lost_acks(cluster.stats, checker.sa)
    tally = checker.tally(
        "PostgreSQL failover (kill -9 primary, promote sync standby)",
        ids,
        cluster.ledger,
        cluster.stats,
        fault=(
            f"primary {old} killed; standby promoted {promoted_at - killed_at:.1f} s later; "
            f"starts unanswered from {down_at - killed_at:.1f} s to "
            f"{recovered_at - killed_at:.1f} s after the kill; "
            f"{acked} acknowledged steps, {lost} of them lost; "
            f"{again} reports answered again (applied before an answer that was lost)"
        ),
    )
    ledger(tally)
    assert lost == 0, tally.line()
    assert acked >= 40
    assert tally.completed == len(ids), tally.line()
    contexts = checker.contexts(ids)
    loops = [ctx for ctx, _ in contexts.values() if "n" in ctx]
    assert loops and all(ctx["n"] == TARGET for ctx in loops)
