"""Benchmark schedules: many applied, a burst due at once, and what the ones not due cost.

    python scripts/bench_schedules.py                       # throwaway PostgreSQL (pgserver)
    python scripts/bench_schedules.py --database postgresql://user@host/db
    python scripts/bench_schedules.py --schedules 10000 --due 1000

The engine runs in this process on a virtual clock standing at the due minute, so the time the
leader takes to fire the burst is the lateness of its last fire had the clock been real. Prints:

- the leader's tick with nothing due, with 0, then all the schedules applied (median ms and
  database commits per tick): the cost of schedules that are not due must stay flat, since the
  leader finds due ones through an index, never by scanning;
- the burst: how long until the last of `--due` schedules due in the same second has fired
  (its lateness), fires per second, and CPU per fire of this process (the leader) and of
  PostgreSQL, with commits per fire.

Every fire is verified from the database: one STARTED row per due schedule, each instance
`<schedule>-<nominal time>` present once, nothing skipped. Not a test: numbers depend on the
machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import UTC, datetime

import psutil
from sqlalchemy import event, func, select

from wiggle._postgres import given_or_throwaway
from wiggle.compiler import load_flow
from wiggle.engine import Engine, VirtualClock
from wiggle.engine.store import schema
from wiggle.schedules import instance_id, load_schedule

FLOW = "wiggle: 1\nname: bench-scheduled\nsteps:\n  - sleep: 1d\n"
START = int(datetime(2026, 1, 1, 0, 0, tzinfo=UTC).timestamp() * 1000)
DUE = START + 30 * 60_000  # 00:30:00 UTC, the burst's nominal time


def postgres_cpu_s() -> float:
    total = 0.0
    for proc in psutil.process_iter(["name"]):
        if proc.info["name"] and proc.info["name"].startswith("postgres"):
            try:
                cpu = proc.cpu_times()
                total += cpu.user + cpu.system
            except psutil.Error:
                pass
    return total


class Commits:
    def __init__(self, engine: Engine) -> None:
        self.count = 0
        event.listen(engine.sa_engine, "commit", self._commit)

    def _commit(self, conn: object) -> None:
        self.count += 1


def idle_tick(engine: Engine, commits: Commits, rounds: int) -> tuple[float, float]:
    """Median ms of a tick with nothing due, and commits per tick."""
    times = []
    before = commits.count
    for _ in range(rounds):
        began = time.perf_counter()
        engine.tick()
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times), (commits.count - before) / rounds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", help="a PostgreSQL URL (default: a throwaway pgserver)")
    parser.add_argument("--schedules", type=int, default=10_000, help="schedules applied")
    parser.add_argument("--due", type=int, default=1_000, help="of them, due in the same second")
    parser.add_argument("--rounds", type=int, default=50, help="idle ticks measured per point")
    args = parser.parse_args()
    if not 0 < args.due <= args.schedules:
        parser.error("--due is between 1 and --schedules")

    with given_or_throwaway(args.database) as url:
        clock = VirtualClock(START)
        engine = Engine(url, clock=clock, leader_ttl_s=3600.0)
        try:
            engine.register(load_flow(FLOW))
            commits = Commits(engine)
            for _ in range(20):  # win the election, warm the caches
                engine.tick()
            idle = [(0, idle_tick(engine, commits, args.rounds))]
            began = time.perf_counter()
            tenth = max(args.schedules // 10, 1)
            for n in range(args.schedules):
                # The due ones fire at 00:30 every day; the others once a year, in March.
                cron = "30 0 * * *" if n < args.due else f"{n % 60} 3 1 3 *"
                engine.apply_schedule(
                    load_schedule(f"schedule: s{n:05d}\nflow: bench-scheduled\ncron: '{cron}'\n")
                )
                if n + 1 == tenth:
                    idle.append((tenth, idle_tick(engine, commits, args.rounds)))
            applied_s = time.perf_counter() - began
            idle.append((args.schedules, idle_tick(engine, commits, args.rounds)))

            clock.set(DUE)
            fired = 0
            cpu0, pg0, commits0 = time.process_time(), postgres_cpu_s(), commits.count
            began = time.perf_counter()
            while fired < args.due:
                engine.tick()
                fired = engine.db.read(
                    lambda c: c.execute(
                        select(func.count()).where(schema.schedule_fires.c.outcome == "STARTED")
                    ).scalar_one()
                )
                if time.perf_counter() - began > 600:
                    print(f"only {fired} of {args.due} fired in 10 minutes", file=sys.stderr)
                    return 1
            lateness_s = time.perf_counter() - began
            cpu = time.process_time() - cpu0
            pg = postgres_cpu_s() - pg0
            burst_commits = commits.count - commits0

            problems = verify(engine, args.due)
        finally:
            engine.close()
    if problems:
        print("verification failed, no figures:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    due = args.due
    each_ms = applied_s / args.schedules * 1000
    print(f"schedules: {args.schedules} applied in {applied_s:.1f} s ({each_ms:.1f} ms each)")
    base = idle[0][1][0]
    for count, (ms, per_tick) in idle:
        print(
            f"idle tick, {count:>6} schedules applied: {ms:6.2f} ms (x{ms / base:.2f}), "
            f"{per_tick:.1f} commits"
        )
    print(
        f"burst: {due} due in the same second, the last fired {lateness_s:.2f} s late "
        f"({due / lateness_s:.0f} fires/s)"
    )
    print(
        f"       leader CPU {cpu / due * 1000:.2f} ms/fire, PostgreSQL CPU "
        f"{pg / due * 1000:.2f} ms/fire, {burst_commits / due:.2f} commits/fire"
    )
    print(f"verified: {due} STARTED fires, {due} instances <schedule>-<nominal time>, none skipped")
    return 0


def verify(engine: Engine, due: int) -> list[str]:
    f, i = schema.schedule_fires, schema.instances

    def read(c):  # type: ignore[no-untyped-def]
        fires = c.execute(select(f.c.schedule, f.c.nominal_ms, f.c.outcome, f.c.instance_id)).all()
        ids = set(c.execute(select(i.c.id)).scalars())
        return fires, ids

    fires, ids = engine.db.read(read)
    problems = []
    started = [r for r in fires if r.outcome == "STARTED"]
    if len(started) != due or len(fires) != due:
        problems.append(
            f"{len(started)} STARTED of {len(fires)} fire rows; expected {due} and {due}"
        )
    for r in started:
        if r.nominal_ms != DUE or r.instance_id != instance_id(r.schedule, DUE):
            problems.append(f"{r.schedule}: fire at {r.nominal_ms} as {r.instance_id}")
        elif r.instance_id not in ids:
            problems.append(f"{r.schedule}: its instance {r.instance_id} is missing")
    if len(ids) != due:
        problems.append(f"{len(ids)} instances; expected {due}")
    return problems[:20]


if __name__ == "__main__":
    raise SystemExit(main())
