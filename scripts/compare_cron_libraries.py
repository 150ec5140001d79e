"""Compare the cron libraries a schedule could walk its timetable with: cronsim (the one Wiggle
uses), croniter, and python-dateutil's rrule (which has no cron syntax: each expression is
written as the rrule a parser of ours would have to build).

    python -m venv /tmp/cron && /tmp/cron/bin/pip install cronsim croniter python-dateutil
    /tmp/cron/bin/python scripts/compare_cron_libraries.py

Wiggle walks a cron expression as naive local wall-clock times and applies the clock-change
rule itself (wiggle/schedules/_times.py), so what a library must do is: the next matching local
time after a given one, fast, with Vixie cron's rules (day of month OR day of week when both are
restricted), seconds as a sixth field, and `L`, `W`, `#`. For each library this prints the
microseconds per next time over a few expressions, and for each rule whether it gives the times
Vixie cron gives (written out below by hand). A library missing here is reported, not guessed.
Not a test: speeds depend on the machine.
"""

from __future__ import annotations

import importlib.metadata
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from itertools import islice

START = datetime(2026, 1, 1, 0, 0, 0)
ROUNDS = 20_000

Walk = Callable[[str, datetime], Iterator[datetime]]


def cronsim_walk(expression: str, start: datetime) -> Iterator[datetime]:
    from cronsim import CronSim

    return iter(CronSim(expression, start))


def croniter_walk(expression: str, start: datetime) -> Iterator[datetime]:
    from croniter import croniter

    # croniter takes seconds as a sixth field at the end; Wiggle's (and cronsim's) is first.
    fields = expression.split()
    if len(fields) == 6:
        expression = " ".join(fields[1:] + fields[:1])
    it = croniter(expression, start)
    while True:
        yield it.get_next(datetime)


#: The rrule a cron parser of ours would have to build for each expression (None: none can).
def rrule_walk(expression: str, start: datetime) -> Iterator[datetime]:
    from dateutil import rrule

    rules: dict[str, Callable[[], rrule.rrule]] = {
        "*/5 * * * *": lambda: rrule.rrule(
            rrule.MINUTELY, interval=5, dtstart=start.replace(minute=0), bysecond=0
        ),
        "30 2 * * *": lambda: rrule.rrule(
            rrule.DAILY, dtstart=start, byhour=2, byminute=30, bysecond=0
        ),
        "0 9-17 * * 1-5": lambda: rrule.rrule(
            rrule.HOURLY,
            dtstart=start,
            byhour=range(9, 18),
            byweekday=range(0, 5),
            byminute=0,
            bysecond=0,
        ),
        "*/2 * * * * *": lambda: rrule.rrule(rrule.SECONDLY, interval=2, dtstart=start),
    }
    if expression not in rules:
        raise NotImplementedError("no rrule without a cron parser of ours")
    return (t for t in rules[expression]() if t > start)


LIBRARIES: dict[str, tuple[str, Walk]] = {
    "cronsim": ("cronsim", cronsim_walk),
    "croniter": ("croniter", croniter_walk),
    "dateutil rrule": ("python-dateutil", rrule_walk),
}

SPEED = ["*/5 * * * *", "30 2 * * *", "0 9-17 * * 1-5", "*/2 * * * * *"]

#: rule -> (expression, the first times strictly after START by Vixie cron's rules (and, for L,
#: W and #, Quartz's meaning of them), written by hand)
RULES: dict[str, tuple[str, list[datetime]]] = {
    "day of month OR day of week": (
        "0 0 13 * 5",  # the 13th, and every Friday (2026-01-02 is a Friday)
        [datetime(2026, 1, 2), datetime(2026, 1, 9), datetime(2026, 1, 13), datetime(2026, 1, 16)],
    ),
    "seconds as a sixth field (first)": (
        "15,45 0 0 * * *",
        [
            datetime(2026, 1, 1, 0, 0, 15),
            datetime(2026, 1, 1, 0, 0, 45),
            datetime(2026, 1, 2, 0, 0, 15),
        ],
    ),
    "L: the last day of the month": (
        "0 0 L * *",
        [datetime(2026, 1, 31), datetime(2026, 2, 28), datetime(2026, 3, 31)],
    ),
    "#: the second Monday": (
        "0 0 * * 1#2",
        [datetime(2026, 1, 12), datetime(2026, 2, 9), datetime(2026, 3, 9)],
    ),
    "W: the weekday nearest the 1st": (
        "0 0 1W * *",  # 2026-02-01 and 2026-03-01 are Sundays: the Mondays after; 04-01 a Wednesday
        [datetime(2026, 2, 2), datetime(2026, 3, 2), datetime(2026, 4, 1)],
    ),
}


def version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def speed_us(walk: Walk, expression: str) -> float | None:
    try:
        times = walk(expression, START)
        next(times)
    except (NotImplementedError, ValueError, KeyError) as exc:
        del exc
        return None
    began = time.perf_counter()
    for _ in islice(times, ROUNDS):
        pass
    return (time.perf_counter() - began) / ROUNDS * 1e6


def follows(walk: Walk, expression: str, expected: list[datetime]) -> str:
    try:
        got = list(islice(walk(expression, START), len(expected)))
    except NotImplementedError:
        return "needs our parser"
    except Exception as exc:  # a library refusing the syntax is the finding
        return f"refused ({type(exc).__name__})"
    return "yes" if got == expected else "wrong: " + ", ".join(t.isoformat() for t in got)


def main() -> int:
    for name, (distribution, walk) in LIBRARIES.items():
        found = version(distribution)
        if found is None:
            print(f"{name}: not installed")
            continue
        print(f"{name} {found}")
        for expression in SPEED:
            us = speed_us(walk, expression)
            figure = "-" if us is None else f"{us:.1f} µs per next time"
            print(f"  {expression:<16} {figure}")
        for rule, (expression, expected) in RULES.items():
            print(f"  {rule:<34} {follows(walk, expression, expected)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
