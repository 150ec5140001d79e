"""Every server down (kill -9) across several fire times, then started again: under each
catch-up policy, the number of fires docs/schedules.md ("Missed fires") says, no more, and the
skipped times recorded with their reasons.

Two servers on one database; five schedules of a flow that ends at once (so the default
`overlap: skip` never meets a running instance), one per policy: `latest`, `all`, `none`, `all`
with `window: 100s`, `all` with `at_most: 3`. Each names the same ten nominal times (a cron list,
six fields, one instant each), in two runs with a gap: OLD, five times two seconds apart from
B, and RECENT, five more from B + 45 s. Both servers are killed before B and come back 118 s
after it, by the clock the engine reads (and a few seconds more: they take that long to start
and lead): every one of the ten is past the minute's grace (GRACE_MS in
wiggle/schedules/_rules.py), so missed; the 100 s window holds none of OLD (110 s old and more)
and all of RECENT (65 to 73 s old, unless the servers take more than 25 s to start).

    policy          fires            skipped, and why
    latest          RECENT[-1]       the other nine ("only the latest is caught up")
    all             all ten          none
    none            none             all ten ("catch_up: none")
    window 100s     RECENT           OLD ("older than the catch-up window")
    at_most 3       RECENT[-3:]      the other seven ("at most 3")

A real outage of two minutes is the full suite's (`real`). The short suite's (`jump`) is a real
outage across OLD, after which the servers come back with their engines reading a clock jumped
ahead to B + 118 s (fault_server.py --clock-offset, through the engine's clock
seam, wiggle.engine.model.clock): everything the engine knows of time it reads from that clock,
so by all it can see, the servers were down from before B to B + 118 s.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from faultkit import deploy, wait_until
from fires import audit, db_now, scalar, tally

from wiggle.client import Client

pytestmark = pytest.mark.timeout(420)

FLOW = 'wiggle: 1\nname: tick\nsteps:\n  - set: {done: "true"}\n'
OLD_S = [0, 2, 4, 6, 8]  # after B
RECENT_S = [45, 47, 49, 51, 53]
BACK_S = 118  # when the servers are back, by the engine's clock, after B
LEAD_S = 6  # B is this long after the schedules are applied: the kill comes first

#: name -> (its catch_up, which of the ten times fire, words the reason of each other one holds)
POLICIES = {
    "outage-latest": ("{missed: latest}", slice(9, 10), "only the latest is caught up"),
    "outage-all": ("{missed: all}", slice(0, 10), ""),
    "outage-none": ("{missed: none}", slice(0, 0), "catch_up: none"),
    "outage-window": (
        "{missed: all, window: 100s}",
        slice(5, 10),
        "older than the catch-up window",
    ),
    "outage-at-most": ("{missed: all, at_most: 3}", slice(7, 10), "at most 3 missed fires"),
}

_SHORT = "tests/faults/test_schedule_outage.py::test_every_server_down_under_each_catch_up_policy"
OUTAGES = [
    "jump",
    pytest.param("real", marks=pytest.mark.full_only(f"{_SHORT}[jump]")),
]


def _cron(ms: int) -> str:
    t = datetime.fromtimestamp(ms / 1000, UTC)
    return f"{t.second} {t.minute} {t.hour} {t.day} {t.month} *"


def _document(name: str, catch_up: str, times: list[int]) -> bytes:
    crons = ", ".join(f'"{_cron(t)}"' for t in times)
    return f"schedule: {name}\nflow: tick\ncron: [{crons}]\ncatch_up: {catch_up}\n".encode()


def _decided(checker, last: int) -> tuple[int, int]:
    """(fire rows, schedules whose cursor is at `last` or past it)."""
    with checker.sa.connect() as conn:
        rows = conn.execute(sa.text("SELECT count(*) FROM wiggle_schedule_fires")).scalar_one()
        cursors = conn.execute(sa.text("SELECT cursor_ms FROM wiggle_schedules")).scalars()
        return int(rows), sum(1 for c in cursors if c >= last)


@pytest.mark.parametrize("outage", OUTAGES)
def test_every_server_down_under_each_catch_up_policy(cluster, checker, ledger, outage):
    a, address = cluster.server(node_id="a")
    b, _ = cluster.server(node_id="b")
    deploy(address, FLOW)
    base = (db_now(checker) // 1000 + LEAD_S) * 1000
    times = [base + s * 1000 for s in OLD_S + RECENT_S]
    with Client(address) as client:
        for name, (catch_up, _, _) in POLICIES.items():
            client.apply_schedule(_document(name, catch_up, times))
    for proc in (a, b):
        assert proc.kill9() == -9
    down_at = db_now(checker)
    assert down_at < base, f"the servers were killed {down_at - base} ms after the first fire"
    assert _decided(checker, times[-1]) == (0, 0)

    back = base + BACK_S * 1000  # by the engine's clock
    if outage == "jump":
        wait_until(lambda: db_now(checker) > times[len(OLD_S) - 1] + 1000, 60, "OLD passed")
        offset_s = (back - db_now(checker)) / 1000
        real_s = (db_now(checker) - down_at) / 1000
    else:
        time.sleep(max(0.0, (back - db_now(checker)) / 1000))
        offset_s = None
        real_s = (db_now(checker) - down_at) / 1000
    again = [cluster.server(node_id=n, clock_offset=offset_s)[0] for n in ("a1", "b1")]
    wait_until(
        lambda: _decided(checker, times[-1])[1] == len(POLICIES), 60, "every schedule deciding"
    )
    for proc in again:  # nothing more may fire: the audit counts every fire there is
        proc.stop()

    found = audit(checker.sa, list(POLICIES))
    outcomes = []
    wrong = []
    for name, (_, fires, why) in POLICIES.items():
        timeline = found.timelines[name]
        expected = times[fires]
        others = [t for t in times if t not in expected]
        reasons = {timeline.skipped.get(t, "") for t in others}
        outcomes.append(f"{name.removeprefix('outage-')} {len(timeline.started)}/{len(times)}")
        if timeline.started != expected or set(timeline.skipped) != set(others):
            wrong.append(f"{name}: started {timeline.started}, skipped {sorted(timeline.skipped)}")
        if others and not all("missed" in r and why in r for r in reasons):
            wrong.append(f"{name}: skipped for {reasons}")
    earliest = scalar(checker, "SELECT min(decided_at_ms) FROM wiggle_schedule_fires")
    how = "no clock jump" if offset_s is None else f"clock +{offset_s:.0f} s at the restart"
    line = tally(
        checker,
        cluster,
        f"schedules: every server down, each catch-up policy ({outage})",
        found,
        fault=(
            f"kill -9 of every server {(base - down_at) / 1000:.1f} s before the first of 10 "
            f"fire times, back {(earliest - base) / 1000:.0f} s after it by the engine's clock "
            f"(real outage {real_s:.0f} s, {how}); fired: {', '.join(outcomes)}; "
            f"skipped: " + ", ".join(f"{n} {r!r}" for r, n in sorted(found.reasons.items()))
        ),
    )
    ledger(line)
    assert found.clean, found.problems
    assert not wrong, wrong
    assert earliest >= back, "a fire was decided while every server was down"
