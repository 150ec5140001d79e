"""Two servers on one database, one of them killed (-9) mid-load and started again.

Workers of the killed server lose their answers and connection at once; they resend, reconnect
to the restarted server and go on. The other server's workers never notice, and the survivor
takes over the leader's duties (timers, expired leases) when the killed one held them.
"""

from __future__ import annotations

import pytest
from faultkit import (
    MODES,
    deploy,
    executions_so_far,
    free_port,
    linear_flow,
    loop_flow,
    scale,
    start_many,
    wait_until,
)

pytestmark = pytest.mark.timeout(300)


def test_server_kill9_with_two_servers_on_one_database(cluster, checker, ledger):
    port = free_port()
    first, a1 = cluster.server(port=port, node_id="first")
    _, a2 = cluster.server(node_id="second")
    flows = deploy(
        a1,
        *(loop_flow(f"two-loop-{m.lower()}", m, target=5) for m in MODES),
        *(linear_flow(f"two-line-{m.lower()}", m, steps=5) for m in MODES),
    )
    cluster.worker(a1, concurrency=6, batch=2)
    cluster.worker(a2, concurrency=6, batch=2)
    n = scale(4, 20)
    ids: list[str] = []
    for i, flow in enumerate(flows):
        ids += start_many(a1 if i % 2 else a2, flow, [{"target": 5, "sleep": 0.05}] * n)
    total = executions_so_far
    wait_until(lambda: total(cluster.ledger) >= len(ids) * 5 // 3, 120, "a third of the steps")
    holder, term = checker.leader()
    assert first.kill9() == -9
    cluster.server(port=port, node_id="first-again")
    checker.wait_finished(ids, timeout=scale(120, 300))

    tally = checker.tally(
        "server kill -9, two servers",
        ids,
        cluster.ledger,
        cluster.stats,
        fault=f"kill -9 of one of two servers (leader then: {holder}, term {term})",
    )
    ledger(tally)
    contexts = checker.contexts(ids)
    loops = [ctx for ctx, _ in contexts.values() if "n" in ctx]
    assert loops and all(ctx["n"] == 5 for ctx in loops)
