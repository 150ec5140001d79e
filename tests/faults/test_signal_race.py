"""Signals racing an await's deadline, sent through one server while the other (the leader)
fires the deadlines: each instance takes exactly one path, the signal's or the timeout's."""

from __future__ import annotations

import json
import time

import pytest
from faultkit import deploy, scale, start_many, wait_until

from wiggle import errors
from wiggle.client import Client

pytestmark = pytest.mark.timeout(300)

DEADLINE_MS = 400

RACE = f"""
wiggle: 1
name: race
steps:
  - await: go
    apply: take
    timeout: {DEADLINE_MS}ms
    on_timeout:
      - task: late
  - task: after
"""


def test_signals_at_the_await_deadline(cluster, checker, ledger):
    _, a1 = cluster.server(node_id="leader")
    wait_until(lambda: checker.leader()[0] == "leader", 30, "the first server leading")
    _, a2 = cluster.server(node_id="other")
    (flow,) = deploy(a1, RACE)
    cluster.worker(a1, concurrency=8)
    n = scale(30, 200)
    sent: dict[str, str] = {}
    with Client(a2) as client:
        for i in range(n):
            (instance,) = start_many(a1, flow, [{}])
            began = time.monotonic()
            # From well before the deadline to well after it, most of them close to it.
            offset = DEADLINE_MS / 1000 * (0.5 + i / max(1, n - 1))
            time.sleep(max(0.0, began + offset - time.monotonic()))
            try:
                delivered = client.signal(instance, "go", {"i": i})
                sent[instance] = "delivered" if delivered else "buffered"
            except errors.WiggleError as exc:  # the instance already finished on its timeout
                sent[instance] = type(exc).__name__
    ids = list(sent)
    checker.wait_finished(ids, timeout=scale(60, 200))

    consumed = {e.instance_id for e in checker.events(ids, ["signal_consumed"])}
    timed_out = {
        e.instance_id
        for e in checker.events(ids, ["timer_fired"])
        if json.loads(e.detail or "{}").get("timer") == "await_timeout"
    }
    contexts = checker.contexts(ids)
    tally = checker.tally(
        "signal race at await deadline",
        ids,
        cluster.ledger,
        cluster.stats,
        fault=f"{len(consumed)} signals in time, {len(timed_out)} deadlines first",
    )
    ledger(tally)
    assert consumed and timed_out, "the race went one way only: it was not a race"
    assert not consumed & timed_out, "an instance took both paths"
    assert consumed | timed_out == set(ids)
    for instance, (ctx, _reason) in contexts.items():
        took_signal = "signal" in ctx
        assert took_signal == (instance in consumed), (instance, ctx)
        assert ("late" in ctx.get("by", {})) == (instance in timed_out), (instance, ctx)
