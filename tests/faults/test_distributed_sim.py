"""The distributed database profile, proven by simulation on PostgreSQL (docs/scaling.md).

Two servers under `--database-profile distributed` on one database whose default isolation is
SERIALIZABLE (and, in the full suite, READ COMMITTED too), each with the commit fault injector
(injector.py): a fraction of commits fails with a serialisation failure, a smaller one loses its
connection around the COMMIT (after it was sent, or before). A worker on each server; loops,
lines, a sleep and an await fed by signals sent through both servers, in every mode. No NOTIFY
crosses the servers: a task one server makes READY reaches the other's pollers by polling.

Every instance must end as it would without the profile: COMPLETED, each loop with exactly its
target count (one report applied twice fails it), each await with its own signal, once; none lost,
none stuck, no duplicated event. The ledger line counts the injected faults, the transactions the
engines ran again (by reason) and the re-executed steps.
"""

from __future__ import annotations

import pytest
from faultkit import FULL, MODES, deploy, linear_flow, loop_flow, read_stats, scale, start_many
from injector import serializable

from wiggle.client import Client

pytestmark = pytest.mark.timeout(420)

TARGET = 4
#: Per commit: serialisation failures, and connections dropped around the COMMIT.
INJECT = (0.10, 0.03)

AWAIT = """
wiggle: 1
name: sim-await
steps:
  - {task: s0, timeout: 2s, retry: {max_attempts: 10, initial: 50ms, max: 200ms}}
  - sleep: 50ms
  - await: go
    apply: take
    timeout: 5m
  - {task: after, timeout: 2s, retry: {max_attempts: 10, initial: 50ms, max: 200ms}}
"""

_SHORT = "tests/faults/test_distributed_sim.py::test_the_profile_under_injected_commit_faults"
ISOLATIONS = [
    "serializable",
    pytest.param("read committed", marks=pytest.mark.full_only(f"{_SHORT}[serializable]")),
]


def _fault_line(stats: dict[str, int]) -> str:
    injected = {k.split(":", 1)[1]: n for k, n in stats.items() if k.startswith("injected:")}
    retried = {k.split(":", 1)[1]: n for k, n in stats.items() if k.startswith("retried:")}
    return (
        f"{injected.get('commits', 0)} commits, {injected.get('serialization', 0)} failed "
        f"serialization, {injected.get('drop_after', 0)} dropped after COMMIT, "
        f"{injected.get('drop_before', 0)} before; transactions run again: "
        + (", ".join(f"{k} {n}" for k, n in sorted(retried.items())) or "none")
    )


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_the_profile_under_injected_commit_faults(cluster, checker, ledger, fault_db, isolation):
    if isolation == "serializable":
        serializable(fault_db)
    a_proc, a = cluster.server(node_id="a", profile="distributed", inject=INJECT, seed=3)
    b_proc, b = cluster.server(node_id="b", profile="distributed", inject=INJECT, seed=4)
    loops = deploy(a, *(loop_flow(f"sim-loop-{m.lower()}", m, target=TARGET) for m in MODES))
    lines = deploy(b, *(linear_flow(f"sim-line-{m.lower()}", m, steps=4) for m in MODES))
    (awaiting,) = deploy(a, AWAIT)
    workers = [cluster.worker(a, concurrency=8, batch=2), cluster.worker(b, concurrency=8, batch=2)]
    n = scale(6, 30)
    loop_ids: list[str] = []
    for i, flow in enumerate(loops):
        loop_ids += start_many((a, b)[i % 2], flow, [{"target": TARGET}] * n)
    ids = list(loop_ids)
    for i, flow in enumerate(lines):
        ids += start_many((b, a)[i % 2], flow, [{}] * n)
    await_ids = start_many(b, awaiting, [{"i": i} for i in range(n)])
    ids += await_ids
    for i, instance in enumerate(await_ids):
        with Client((a, b)[i % 2]) as client:
            client.signal(instance, "go", {"i": i})
    checker.wait_finished(ids, timeout=scale(180, 360))

    for proc in (*workers, a_proc, b_proc):  # the servers write their counts as they stop
        proc.stop()
    stats = dict(read_stats(cluster.stats))
    tally = checker.tally(
        f"distributed profile, {isolation}, injected commit faults",
        ids,
        cluster.ledger,
        cluster.stats,
        fault=_fault_line(stats),
    )
    ledger(tally)
    assert tally.completed == len(ids), tally.line()
    assert stats.get("injected:serialization", 0) >= (3 if not FULL else 20), stats
    assert stats.get("injected:drop_after", 0) + stats.get("injected:drop_before", 0) >= 2, stats
    # Every injected serialisation failure made an engine run its transaction again.
    assert stats.get("retried:serialization", 0) >= stats["injected:serialization"], stats
    contexts = checker.contexts(ids)
    assert all(contexts[i][0]["n"] == TARGET for i in loop_ids), "a loop ran off its count"
    for i, instance in enumerate(await_ids):
        assert contexts[instance][0]["signal"] == {"i": i}, contexts[instance]
    consumed = [e.instance_id for e in checker.events(await_ids, ["signal_consumed"])]
    assert sorted(consumed) == sorted(await_ids), "a signal was consumed twice, or not at all"
