"""An application with Wiggle embedded, killed (-9) under load on PostgreSQL, then started again:
nothing lost, and what re-runs stays within the bound of a killed worker: the step in flight
(SERVER, LOCAL_SYNC), the steps since the last flush (LOCAL_ASYNC, which flushes after the
`checkpoint` step s2). The node, its worker and the starts die together; the restarted one
takes the dead one's leases over once they expire."""

from __future__ import annotations

import sys

import pytest
from faultkit import (
    FULL,
    HERE,
    MODES,
    Proc,
    executions_so_far,
    linear_flow,
    reexecuted_keys,
    scale,
    wait_until,
)

pytestmark = pytest.mark.timeout(300)

STEPS = 6
SEGMENTS = ({"s0#0", "s1#0", "s2#0"}, {"s3#0", "s4#0", "s5#0"})


@pytest.mark.parametrize("mode", MODES if FULL else ["LOCAL_SYNC", "LOCAL_ASYNC"])
def test_an_embedded_app_killed_mid_load_loses_nothing(
    fault_db, tmp_path, checker, ledger, mode
) -> None:
    flow = tmp_path / "flow.yaml"
    flow.write_text(linear_flow(f"embedded-{mode.lower()}", mode, steps=STEPS))
    ledger_file = tmp_path / "ledger.txt"
    env = {"WIGGLE_FAULT_LEDGER": str(ledger_file)}
    app = [sys.executable, str(HERE / "embedded_app.py"), fault_db]
    n = scale(12, 60)
    first = Proc([*app, str(flow), str(n)], env=env)
    first.wait_for("started")
    wait_until(
        lambda: executions_so_far(ledger_file) >= n * STEPS // 3, 120, "a third of the steps"
    )
    assert first.kill9() == -9
    second = Proc(app, env=env)
    second.wait_for("serving")
    ids = [f"emb-{i}" for i in range(n)]
    try:
        checker.wait_finished(ids, timeout=scale(90, 300))
    finally:
        second.stop()
    expired = len(checker.events(ids, ["lease_expired"]))
    tally = checker.tally(
        f"embedded app kill -9, {mode}",
        ids,
        ledger_file,
        fault=f"kill -9 of the app mid-load, {expired} leases expired",
    )
    ledger(tally)
    for instance in ids:
        again = reexecuted_keys(ledger_file, instance)
        if mode == "LOCAL_ASYNC":
            assert any(again <= segment for segment in SEGMENTS), (instance, again)
        else:
            assert len(again) <= 1, (instance, again)
