"""Wiggle under load on a Patroni cluster (hacluster.py): what every cluster scenario shares.

Two fault servers and two workers connect the way docs/scaling.md tells users to: the multi-host
URL (`?host=A&host=B&host=C&target_session_attrs=read-write`) or HAProxy's one address. A steady
load of starts (start_load.py: caller-chosen ids, sent again until answered) runs loops and
lines in every mode. The checker reads the tables through the multi-host URL, never through the
proxy under test.

The time to recover is read from the database's own history: the `at_ms` of every
`step_completed` event after the fault. Steps commit every few milliseconds under this load, so
the first pause of a second or more after the fault is the outage: it began with the last step
committed before it (the old primary's last) and ended with the first one committed after it
(the new primary's first). No such pause: the fault cost no outage.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa
from acks import lost_acks
from faultkit import (
    MODES,
    Checker,
    Cluster,
    Tally,
    deploy,
    executions_so_far,
    linear_flow,
    loop_flow,
    scale,
    wait_until,
)
from hacluster import HaCluster
from start_load import Load

__all__ = ["LAYOUTS", "TARGET", "Outage", "WiggleOnHa"]

TARGET = 4
#: How the servers and workers reach the database.
LAYOUTS = ("multi-host URL", "HAProxy")
#: A pause in commits at least this long after a fault is the outage.
PAUSE_MS = 1000


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class Outage:
    """Commits around a fault, from the events' `at_ms` (the database's clock, this machine's)."""

    fault_ms: int
    last_ms: int | None  # the last step committed before the pause
    first_ms: int | None  # the first step committed after it
    longest_ms: int  # the longest pause between commits from the fault on

    @property
    def recovered_s(self) -> float | None:
        """From the fault to the first step committed again (None: no pause at all)."""
        return None if self.first_ms is None else (self.first_ms - self.fault_ms) / 1000

    def says(self, led_ms: int | None = None) -> str:
        """The outage in words; `led_ms`: when Patroni named the new leader (from the fault)."""
        if self.first_ms is None:
            return f"no pause in commits (longest gap {self.longest_ms / 1000:.1f} s)"
        assert self.last_ms is not None
        led = (
            ""
            if led_ms is None
            else f", Patroni's new leader seen at +{(led_ms - self.fault_ms) / 1000:.1f} s"
        )
        return (
            f"steps committed until {(self.last_ms - self.fault_ms) / 1000:+.1f} s{led}, "
            f"again from {self.recovered_s:.1f} s after the fault"
        )


class WiggleOnHa:
    """The servers, workers, load and checker of one scenario on `ha`."""

    def __init__(self, ha: HaCluster, layout: str, work: Path) -> None:
        self.ha = ha
        ha.create_database("wiggle")
        url = ha.url("wiggle") if layout == LAYOUTS[0] else ha.haproxy_url("wiggle")
        self.layout = layout
        self.cluster = Cluster(url, work)
        self.checker = Checker(ha.url("wiggle"))
        self.load: Load | None = None
        self.servers = [
            self.cluster.server(node_id=f"s{i}", acks=True, leader_ttl=2.0) for i in (1, 2)
        ]
        addresses = [address for _, address in self.servers]
        self.flows = flows = deploy(
            addresses[0],
            *(loop_flow(f"ha-loop-{m.lower()}", m, target=TARGET, attempts=30) for m in MODES),
            *(linear_flow(f"ha-line-{m.lower()}", m, steps=4, attempts=30) for m in MODES),
        )
        for address in addresses:
            self.cluster.worker(address, concurrency=8, batch=2)
        # The short suite's load is lighter: steps still commit every few milliseconds.
        pause = scale(200, 20) / 1000
        self.load = Load(addresses, flows, {"target": TARGET}, prefix="ha", pause=pause)

    def mark(self) -> list[int]:
        """Where each server's output stands now, for `logged_since`."""
        return [len(proc.lines) for proc, _ in self.servers]

    def logged_since(self, mark: list[int]) -> list[str]:
        """The log records the servers wrote since `mark` (WARNING and up; one a record, the
        lines of a traceback left out)."""
        out = []
        for (proc, _), seen in zip(self.servers, mark, strict=True):
            out += [line for line in list(proc.lines)[seen:] if line[:2] == "20"]  # timestamped
        return out

    def warm(self, starts: int, steps: int) -> None:
        """Wait until the load has had `starts` starts answered and `steps` steps run."""
        load = self.load
        assert load is not None
        wait_until(lambda: len(load.acked) >= starts, 180, "starts answered before", interval=0.1)
        wait_until(
            lambda: executions_so_far(self.cluster.ledger) >= steps,
            180,
            "steps run before",
            interval=0.25,
        )

    def commits_since(self, since_ms: int) -> list[int]:
        with self.checker.sa.connect() as conn:
            rows = conn.execute(
                sa.text(
                    "SELECT at_ms FROM wiggle_events WHERE kind = 'step_completed' "
                    "AND at_ms >= :since ORDER BY at_ms"
                ),
                {"since": since_ms},
            ).all()
        return [int(r.at_ms) for r in rows]

    def outage(self, fault_ms: int, *, pause_ms: int = PAUSE_MS) -> Outage:
        """The first pause of `pause_ms` or more in commits from `fault_ms` on."""
        last, longest = fault_ms, 0
        for at in self.commits_since(fault_ms):
            longest = max(longest, at - last)
            if at - last >= pause_ms:
                return Outage(fault_ms, last, at, longest)
            last = at
        return Outage(fault_ms, None, None, longest)

    def recovered(
        self, fault_ms: int, after_ms: int, timeout: float = 180, pause_ms: int = PAUSE_MS
    ) -> Outage:
        """Wait for a step committed from `after_ms` on (when the new primary was named), then
        a few more starts; the outage from `fault_ms` (which may be no pause at all: a
        switchover can be quicker than PAUSE_MS)."""

        def ended() -> Outage | None:
            try:
                if not self.commits_since(after_ms):
                    return None
                return self.outage(fault_ms, pause_ms=pause_ms)
            except sa.exc.OperationalError:  # no primary to read from yet
                return None

        found = wait_until(
            ended,
            timeout,
            "steps committed again after the fault",
            interval=0.5,
        )
        assert isinstance(found, Outage)
        self.more_starts(scale(10, 40))
        return found

    def more_starts(self, n: int) -> None:
        load = self.load
        assert load is not None
        since = time.monotonic()
        wait_until(
            lambda: len(load.answered_since(since)) >= n, 180, f"{n} more starts", interval=0.1
        )

    def finish(self, scenario: str, fault: str) -> tuple[Tally, int, list[str]]:
        """Stop the load, wait for every instance, and tally: (the line, acknowledged steps
        lost, the instances)."""
        assert self.load is not None
        seen = dict(self.load.seen)
        ids = self.load.stop()
        self.load = None
        self.checker.wait_finished(ids, timeout=scale(240, 400))
        acked, lost, again = lost_acks(self.cluster.stats, self.checker.sa)
        told = ", ".join(f"{k} {n}" for k, n in sorted(seen.items())) or "nothing"
        tally = self.checker.tally(
            f"{scenario} ({self.layout})",
            ids,
            self.cluster.ledger,
            self.cluster.stats,
            fault=(
                f"{fault}; starts refused meanwhile: {told}; {acked} acknowledged steps, "
                f"{lost} of them lost; {again} reports answered again"
            ),
        )
        return tally, lost, ids

    def contexts_right(self, ids: list[str]) -> bool:
        loops = [ctx for ctx, _ in self.checker.contexts(ids).values() if "n" in ctx]
        return bool(loops) and all(ctx["n"] == TARGET for ctx in loops)

    def close(self) -> None:
        if self.load is not None:
            self.load.stop()
        self.cluster.close()
        self.checker.close()
