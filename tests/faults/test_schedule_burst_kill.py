"""The leader killed (-9) while it fires a burst: 100 schedules due in the same second.

Two servers on one database; 100 schedules of a flow that ends at once, half `interval: {every:
2s}`, half `cron: "*/2 * * * * *"` (six fields, seconds first), applied in one `wiggle schedule
apply`: every two seconds all 100 fall due together. The kill is aimed at a burst: once some but
not all of its fires are committed, the server leading then gets kill -9. A kill that landed after
the burst was done is no test of it: the server is started again in its place and the kill aimed
at a later burst. The other server takes the lead and fires what is left, and two more bursts.

From the tables (fires.py): for every schedule, each nominal time from its creation to its cursor
(wiggle.schedules.nominal_times) decided by exactly one `wiggle_schedule_fires` row, STARTED,
none missing, none doubled; each STARTED row's instance `<schedule>-<nominal time>` there once;
no instance of a schedule without its row (docs/schedules.md: "a leader killed at any point
neither loses a nominal time nor doubles one"). And no fire late by more than the takeover
(the killed leader's lease) and a generous margin: only an outage makes a fire late (GRACE_MS
in wiggle/schedules/_rules.py), and a burst of 100 is no outage.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from faultkit import deploy, read_stats, scale, wait_until
from fires import audit, db_now, fired_at, tally

pytestmark = pytest.mark.timeout(300)

SCHEDULES = 100
PERIOD_S = 2
KILLS = scale(1, 3)
AFTER = scale(2, 5)  # bursts fired after the last kill
LEADER_TTL = 2.0
#: The most a fire may be late: the killed leader's lease, then a generous margin for a loaded
#: machine (a bound on what the leader may leave undone, not a benchmark).
LATE_BOUND_S = LEADER_TTL + 15.0

FLOW = 'wiggle: 1\nname: tick\nsteps:\n  - set: {done: "true"}\n'


def _document(i: int) -> str:
    if i % 2 == 0:
        timetable = f"interval: {{every: {PERIOD_S}s}}"
    else:
        timetable = f'cron: "*/{PERIOD_S} * * * * *"'
    return f"schedule: burst-{i:03d}\nflow: tick\n{timetable}\n"


def test_leader_killed_during_a_burst_of_due_fires(cluster, checker, ledger, tmp_path):
    servers = cluster.servers("a", "b", leader_ttl=LEADER_TTL, note_fires=True)
    address = servers["a"][2]
    deploy(address, FLOW)
    files = []
    for i in range(SCHEDULES):
        path = tmp_path / f"burst-{i:03d}.schedule.yaml"
        path.write_text(_document(i))
        files.append(str(path))
    began = time.monotonic()
    apply = subprocess.run(
        [sys.executable, "-m", "wiggle", "schedule", "apply", *files, "--address", address],
        capture_output=True,
        text=True,
        timeout=120,
    )
    applied_s = time.monotonic() - began
    assert apply.returncode == 0, apply.stdout + apply.stderr
    assert apply.stdout.count(" created; next fire ") == SCHEDULES, apply.stdout

    period = PERIOD_S * 1000
    landed: list[str] = []
    too_late: list[str] = []
    generation = 0
    nominal = (db_now(checker) // period + 1) * period  # the first burst after the apply
    while len(landed) < KILLS:
        assert len(too_late) < 5, f"every kill landed after its burst: {too_late}"
        while fired_at(checker, nominal) > 0:
            nominal += period  # begun already (the takeover after a kill): aim at a later one
        threshold = 1 + (nominal // period * 37) % (SCHEDULES // 2)  # in its first half
        wait_until(
            lambda n=nominal, t=threshold: fired_at(checker, n) >= t,
            LATE_BOUND_S + PERIOD_S,
            f"{threshold} fires of the burst at {nominal} (applied in {applied_s:.1f} s)",
            interval=0.002,
        )
        holder, term = checker.leader()
        assert servers[holder][0].kill9() == -9
        at_kill = fired_at(checker, nominal)
        what = f"{holder} (term {term}) at {at_kill} of {SCHEDULES} fires of a burst"
        (landed if at_kill < SCHEDULES else too_late).append(what)
        wait_until(lambda h=holder: checker.leader()[0] != h, 60, "another server leading")
        wait_until(
            lambda n=nominal: fired_at(checker, n) == SCHEDULES,
            LATE_BOUND_S,
            f"the burst finished by the new leader (applied in {applied_s:.1f} s)",
        )
        # A new server in the killed one's place, on its port (the next kill's target when it
        # leads then).
        generation += 1
        port = servers.pop(holder)[1]
        node = f"{holder[0]}{generation}"
        proc, again = cluster.server(
            port=port, node_id=node, leader_ttl=LEADER_TTL, note_fires=True
        )
        servers[node] = (proc, port, again)
    last = nominal + AFTER * period
    wait_until(lambda: fired_at(checker, last) == SCHEDULES, 60, "the bursts after the kills")
    holder, term = checker.leader()
    found = audit(checker.sa, [f"burst-{i:03d}" for i in range(SCHEDULES)])
    stats = read_stats(cluster.stats)
    decided = {
        key.split(":")[2]: n for key, n in stats.items() if key.startswith("schedule:decided:")
    }
    line = tally(
        checker,
        cluster,
        "schedules: leader kill -9 in a burst of 100",
        found,
        fault=(
            f"applied in {applied_s:.1f} s; kill -9 of the leader "
            f"{'; '.join(landed) or 'never inside a burst'} ({len(too_late)} after a burst, "
            f"aimed again); {holder} leads at the end (term {term}); {found.line()}; decided "
            "by " + ", ".join(f"{node} {n}" for node, n in sorted(decided.items()))
        ),
    )
    ledger(line)
    assert found.clean, found.problems
    assert found.started == found.timetable >= SCHEDULES * (KILLS + AFTER), found.line()
    assert found.skipped == found.buffered == 0, found.reasons
    assert line.completed == found.started
    assert found.worst_late_ms <= LATE_BOUND_S * 1000, found.line()
