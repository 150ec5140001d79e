"""What a checked schedule document is (docs/schedules.md). Plain data; no I/O."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

__all__ = [
    "DAY_NAMES",
    "OVERLAP_POLICIES",
    "Calendar",
    "CatchUp",
    "Exclusion",
    "Schedule",
    "Spec",
]

#: Day names as cron and calendar entries write them, Monday first (Python's weekday()).
DAY_NAMES = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")

OVERLAP_POLICIES = ("skip", "buffer_one", "buffer_all", "cancel_running", "allow_all")


@dataclass(frozen=True)
class Calendar:
    """A calendar entry: every local time matching all its fields. A field that is None takes
    every value, except seconds, minutes and hours, which take 0."""

    seconds: frozenset[int] | None = None
    minutes: frozenset[int] | None = None
    hours: frozenset[int] | None = None
    days_of_month: frozenset[int] | None = None
    months: frozenset[int] | None = None
    days_of_week: frozenset[int] | None = None  # 0 = Monday

    def cron(self) -> str:
        """The 6-field cron expression (seconds first) of the entry's times, days of the week
        aside when days of the month are given too: cron takes a day matching either, an entry
        needs both, so those are checked apart (`day_of_week_matches`)."""

        def field(values: frozenset[int] | None, default: str) -> str:
            return default if values is None else ",".join(str(v) for v in sorted(values))

        week = "*"
        if self.days_of_week is not None and self.days_of_month is None:
            # cron counts Sunday as 0; here Monday is 0.
            week = ",".join(str((d + 1) % 7) for d in sorted(self.days_of_week))
        return " ".join(
            [
                field(self.seconds, "0"),
                field(self.minutes, "0"),
                field(self.hours, "0"),
                field(self.days_of_month, "*"),
                field(self.months, "*"),
                week,
            ]
        )

    def day_of_week_matches(self, naive: datetime) -> bool:
        return self.days_of_week is None or naive.weekday() in self.days_of_week


@dataclass(frozen=True)
class Exclusion:
    """An `except` entry: the local times matching all its fields (a field that is None takes
    every value), or on one of its dates."""

    seconds: frozenset[int] | None = None
    minutes: frozenset[int] | None = None
    hours: frozenset[int] | None = None
    days_of_month: frozenset[int] | None = None
    months: frozenset[int] | None = None
    days_of_week: frozenset[int] | None = None
    dates: frozenset[str] | None = None  # YYYY-MM-DD

    def matches(self, naive: datetime) -> bool:
        checks = (
            (self.seconds, naive.second),
            (self.minutes, naive.minute),
            (self.hours, naive.hour),
            (self.days_of_month, naive.day),
            (self.months, naive.month),
            (self.days_of_week, naive.weekday()),
        )
        if any(values is not None and value not in values for values, value in checks):
            return False
        return self.dates is None or naive.date().isoformat() in self.dates


@dataclass(frozen=True)
class Spec:
    """When a schedule fires: the union of its cron expressions (5 or 6 fields, aliases
    expanded), calendar entries and intervals, less its exclusions, within start and end."""

    zone: ZoneInfo
    crons: tuple[str, ...] = ()
    calendars: tuple[Calendar, ...] = ()
    intervals: tuple[tuple[int, int], ...] = ()  # (every, offset) in ms
    exclusions: tuple[Exclusion, ...] = ()
    start_ms: int | None = None
    end_ms: int | None = None
    jitter_ms: int = 0
    skipped: str = "after"  # a local time the clocks jump over: "after" | "skip"
    repeated: str = "first"  # a local time that happens twice: "first" | "last" | "both"


@dataclass(frozen=True)
class CatchUp:
    """What happens to nominal times that passed while no server fired them."""

    missed: str = "latest"  # "latest" | "all" | "none"
    window_ms: int | None = None
    at_most: int | None = None


@dataclass(frozen=True)
class Schedule:
    """A checked schedule document."""

    name: str
    flow: str
    version: str | None  # None: the newest registered at each fire
    spec: Spec
    overlap: str = "skip"
    catch_up: CatchUp = field(default_factory=CatchUp)
    paused: bool = False
    input: Any = field(default_factory=dict)
    input_values: tuple[tuple[str, str], ...] = ()  # (key, CEL source), keys sorted
    description: str = ""
    document: Any = None  # the document as written, for storage and `describe`
