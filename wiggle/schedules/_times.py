"""A schedule's nominal times: its cron expressions, calendar entries and intervals, less its
exclusions, within its start and end, as instants (UTC milliseconds, whole seconds). Pure: no
I/O, no clock.

cron and calendar entries name local times in the schedule's zone; cronsim walks those as
naive wall-clock times, one each, and the rule here turns each into instants: a local time that
exists once is one instant; one the clocks skip is the first instant after the jump (`after`)
or none (`skip`); one that happens twice is its first occurrence, its second, or both. Mapping
local times to instants is not monotonic near a repeated hour, so instants wait in a small heap
until no later local time can map before them.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from cronsim import CronSim

from wiggle.schedules._model import Calendar, Spec

__all__ = ["HORIZON_MS", "MAX_EXCLUDED_IN_A_ROW", "local_time", "nominal_times"]

#: How far ahead a search for the next nominal time looks before it says there is none (a
#: schedule whose exclusions remove every time it names would otherwise search forever).
HORIZON_MS = 10 * 366 * 86_400_000

#: How many excluded times in a row the search passes over before it says there is no next one
#: (a schedule firing every second whose exclusions cover days at a time would otherwise walk
#: millions of seconds).
MAX_EXCLUDED_IN_A_ROW = 100_000

# Clock changes move local time by at most this much (real zones: two hours at the most).
_SHIFT_MS = 3 * 3_600_000

_EPOCH = datetime(1970, 1, 1)


def nominal_times(spec: Spec, after_ms: int, *, until_ms: int | None = None) -> Iterator[int]:
    """The nominal times of `spec` strictly after `after_ms`, ascending, each once, up to
    `until_ms` (inclusive) or the spec's end or the search horizon."""
    last = after_ms + HORIZON_MS
    if until_ms is not None:
        last = min(last, until_ms)
    if spec.end_ms is not None:
        last = min(last, spec.end_ms)
    start = after_ms if spec.start_ms is None else max(after_ms, spec.start_ms - 1)
    sources: list[Iterable[int]] = [
        _interval(every, offset, start) for every, offset in spec.intervals
    ]
    sources += [_local(spec, expression, None, start) for expression in spec.crons]
    sources += [_local(spec, c.cron(), c, start) for c in spec.calendars]
    previous = None
    passed_over = 0
    for instant in heapq.merge(*sources):
        if instant > last:
            return
        if instant == previous:
            continue
        previous = instant
        if _excluded(spec, instant):
            passed_over += 1
            if passed_over > MAX_EXCLUDED_IN_A_ROW:
                return
            continue
        passed_over = 0
        yield instant


def local_time(spec: Spec, instant_ms: int) -> datetime:
    """The naive wall-clock time of `instant_ms` in the spec's zone."""
    return datetime.fromtimestamp(instant_ms / 1000, spec.zone).replace(tzinfo=None)


def _interval(every_ms: int, offset_ms: int, after_ms: int) -> Iterator[int]:
    k = (after_ms - offset_ms) // every_ms + 1
    while True:
        yield k * every_ms + offset_ms
        k += 1


def _local(spec: Spec, expression: str, calendar: Calendar | None, after_ms: int) -> Iterator[int]:
    """The instants of one cron expression's local times (and of a calendar entry, which is
    one cron expression with its days of the week also required)."""
    # The earliest local time an instant after `after_ms` can have: the clocks may go back
    # within the next few hours (real zones change at most once in that long), and then an
    # instant soon after `after_ms` reads earlier than `after_ms` does. Starting further back
    # costs a walk over every local time in between: 5,400 of them for a cron every 2 seconds.
    shift = timedelta(milliseconds=_SHIFT_MS)
    begin = min(local_time(spec, after_ms), local_time(spec, after_ms + _SHIFT_MS) - shift)
    waiting: list[int] = []
    for naive in CronSim(expression, begin - timedelta(seconds=1)):
        if calendar is not None and not calendar.day_of_week_matches(naive):
            continue
        for instant in _instants(spec.zone, naive, spec.skipped, spec.repeated):
            if instant > after_ms:
                heapq.heappush(waiting, instant)
        # Every later local time maps at or after this one read with the largest offset the
        # zone has from now to a few hours on (one change at most in that time; a local time
        # further on is later by more than any change moves it back).
        largest = max(_max_offset_ms(spec.zone, naive), _max_offset_ms(spec.zone, naive + shift))
        floor = _as_utc_ms(naive) - largest
        while waiting and waiting[0] <= floor:
            yield heapq.heappop(waiting)


def _instants(zone: ZoneInfo, naive: datetime, skipped: str, repeated: str) -> list[int]:
    """The instants a local time stands for under the schedule's clock-change rule."""
    first = _ms(naive.replace(tzinfo=zone, fold=0))
    second = _ms(naive.replace(tzinfo=zone, fold=1))
    exists_first = _round_trips(zone, naive, first)
    exists_second = _round_trips(zone, naive, second)
    if not exists_first and not exists_second:  # in a gap: the clocks jumped over it
        if skipped == "skip":
            return []
        return [_after_gap(zone, min(first, second), max(first, second))]
    if exists_first and exists_second and first != second:  # happens twice
        if repeated == "both":
            return [min(first, second), max(first, second)]
        return [min(first, second) if repeated == "first" else max(first, second)]
    return [first if exists_first else second]


def _after_gap(zone: ZoneInfo, low_ms: int, high_ms: int) -> int:
    """The first instant after a jump of the clocks that lies between `low_ms` and `high_ms`:
    the first whole second whose offset is the later one."""
    later = _offset(zone, high_ms)
    low, high = low_ms // 1000, high_ms // 1000
    while low < high:
        middle = (low + high) // 2
        if _offset(zone, middle * 1000) == later:
            high = middle
        else:
            low = middle + 1
    return low * 1000


def _offset(zone: ZoneInfo, instant_ms: int) -> timedelta | None:
    return datetime.fromtimestamp(instant_ms / 1000, zone).utcoffset()


def _round_trips(zone: ZoneInfo, naive: datetime, instant_ms: int) -> bool:
    return datetime.fromtimestamp(instant_ms / 1000, zone).replace(tzinfo=None) == naive


def _max_offset_ms(zone: ZoneInfo, naive: datetime) -> int:
    offsets = [naive.replace(tzinfo=zone, fold=fold).utcoffset() for fold in (0, 1)]
    return int(max(o or timedelta(0) for o in offsets).total_seconds() * 1000)


def _as_utc_ms(naive: datetime) -> int:
    return (naive - _EPOCH) // timedelta(milliseconds=1)


def _ms(moment: datetime) -> int:
    return int(moment.astimezone(UTC).timestamp() * 1000)


def _excluded(spec: Spec, instant_ms: int) -> bool:
    if not spec.exclusions:
        return False
    naive = local_time(spec, instant_ms)
    return any(e.matches(naive) for e in spec.exclusions)
