"""The leader stopped (SIGSTOP) while timers fall due, then continued (SIGCONT).

The other server takes over once the leader's lease lapses and fires the timers; the old leader,
continued, must not fire them again. Every timer fires once, and no later than the leader lease
(plus a tick) after it was due.
"""

from __future__ import annotations

import json
import signal

import pytest
from faultkit import deploy, read_ledger, scale, start_many, wait_until

pytestmark = pytest.mark.timeout(300)

LEADER_TTL = 1.5
SLEEP_MS = 400

SLEEPY = f"""
wiggle: 1
name: sleepy
steps:
  - {{task: s0, timeout: 5s}}
  - sleep: {SLEEP_MS}ms
  - {{task: s1, timeout: 5s}}
"""


def test_timers_fire_once_across_a_stopped_leader(cluster, checker, ledger):
    leader, _ = cluster.server(node_id="leader", leader_ttl=LEADER_TTL)
    wait_until(lambda: checker.leader()[0] == "leader", 30, "the first server leading")
    _, a2 = cluster.server(node_id="standby", leader_ttl=LEADER_TTL)
    (flow,) = deploy(a2, SLEEPY)
    cluster.worker(a2, concurrency=8)  # the leader's clients would hang with it
    _, term = checker.leader()
    n = scale(20, 100)
    ids = start_many(a2, flow, [{}] * (n // 2))
    wait_until(
        lambda: sum(e.key == "s0#0" for e in read_ledger(cluster.ledger)) >= n // 4,
        60,
        "timers armed",
    )
    leader.signal(signal.SIGSTOP)
    wait_until(lambda: checker.leader()[0] == "standby", 60, "the standby taking over")
    # More timers, falling due while the old leader runs again beside the new one: its stale
    # term must not let it fire any of them.
    ids += start_many(a2, flow, [{}] * (n - n // 2))
    leader.signal(signal.SIGCONT)
    finished = checker.wait_finished(ids, timeout=scale(60, 120))

    holder, new_term = checker.leader()
    fired = checker.events(ids, ["timer_fired"])
    done = {
        e.instance_id: e.at_ms for e in checker.events(ids, ["step_completed"]) if e.node_id == "s0"
    }
    lateness = [
        e.at_ms - (done[e.instance_id] + SLEEP_MS)
        for e in fired
        if json.loads(e.detail or "{}").get("timer") == "sleep"
    ]
    worst = max(lateness) if lateness else 0
    tally = checker.tally(
        "leader SIGSTOP",
        ids,
        cluster.ledger,
        cluster.stats,
        fault=f"leader stopped; term {term} -> {new_term} ({holder}); latest timer {worst} ms late",
    )
    ledger(tally)
    assert set(finished.values()) == {"COMPLETED"}
    assert tally.timers_fired == n  # one sleep each, fired once
    # Due while nobody led: fired by the new leader within its election (the old lease lapsing)
    # and one tick. Generous: the bound documented is the leader lease, not a benchmark.
    assert worst <= (LEADER_TTL + 1.0) * 1000 + 3000, lateness
