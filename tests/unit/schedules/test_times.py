"""A schedule's nominal times (wiggle.schedules._times): the local times its cron expressions,
calendar entries and intervals name, as instants, with the clock-change rule applied. Every
expected time below is written by hand from the zone's published transitions (Europe/Berlin:
2026-03-29 02:00 -> 03:00, 2026-10-25 03:00 -> 02:00)."""

from __future__ import annotations

from datetime import datetime
from itertools import islice
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from wiggle.schedules._model import Calendar, Exclusion, Spec
from wiggle.schedules._times import nominal_times

BERLIN = ZoneInfo("Europe/Berlin")


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp() * 1000)


def times(spec: Spec, after: str, count: int) -> list[str]:
    return [
        datetime.fromtimestamp(t / 1000, spec.zone).isoformat()
        for t in islice(nominal_times(spec, ms(after)), count)
    ]


def test_a_daily_time_on_the_night_the_clocks_go_forward_runs_once_after_the_jump() -> None:
    spec = Spec(BERLIN, crons=("30 2 * * *",))
    assert times(spec, "2026-03-28T12:00:00+01:00", 3) == [
        "2026-03-29T03:00:00+02:00",
        "2026-03-30T02:30:00+02:00",
        "2026-03-31T02:30:00+02:00",
    ]


def test_a_skipped_local_time_can_be_skipped() -> None:
    spec = Spec(BERLIN, crons=("30 2 * * *",), skipped="skip")
    assert times(spec, "2026-03-28T12:00:00+01:00", 2) == [
        "2026-03-30T02:30:00+02:00",
        "2026-03-31T02:30:00+02:00",
    ]


def test_several_skipped_local_times_fire_once_after_the_jump() -> None:
    spec = Spec(BERLIN, crons=("*/15 2 * * *",))
    assert times(spec, "2026-03-29T00:00:00+01:00", 2) == [
        "2026-03-29T03:00:00+02:00",
        "2026-03-30T02:00:00+02:00",
    ]


@pytest.mark.parametrize(
    ("repeated", "expected"),
    [
        ("first", ["2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"]),
        ("last", ["2026-10-25T02:30:00+01:00", "2026-10-26T02:30:00+01:00"]),
        ("both", ["2026-10-25T02:30:00+02:00", "2026-10-25T02:30:00+01:00"]),
    ],
)
def test_a_daily_time_on_the_night_the_clocks_go_back(repeated: str, expected: list[str]) -> None:
    spec = Spec(BERLIN, crons=("30 2 * * *",), repeated=repeated)
    assert times(spec, "2026-10-24T12:00:00+02:00", 2) == expected


def test_repeated_times_come_out_in_instant_order() -> None:
    spec = Spec(BERLIN, crons=("*/30 2 * * *",), repeated="both")
    assert times(spec, "2026-10-25T01:00:00+02:00", 5) == [
        "2026-10-25T02:00:00+02:00",
        "2026-10-25T02:30:00+02:00",
        "2026-10-25T02:00:00+01:00",
        "2026-10-25T02:30:00+01:00",
        "2026-10-26T02:00:00+01:00",
    ]


def test_an_interval_counts_from_the_epoch_in_utc_whatever_the_zone() -> None:
    spec = Spec(BERLIN, intervals=((6 * 3_600_000, 30 * 60_000),))
    assert times(spec, "2026-10-25T00:00:00+00:00", 3) == [
        "2026-10-25T02:30:00+02:00",  # 00:30Z
        "2026-10-25T07:30:00+01:00",  # 06:30Z
        "2026-10-25T13:30:00+01:00",  # 12:30Z
    ]


def test_a_calendar_entry_needs_every_field_to_match() -> None:
    friday_13th = Calendar(
        hours=frozenset({9}), days_of_month=frozenset({13}), days_of_week=frozenset({4})
    )
    spec = Spec(BERLIN, calendars=(friday_13th,))
    assert times(spec, "2026-01-01T00:00:00+01:00", 3) == [
        "2026-02-13T09:00:00+01:00",
        "2026-03-13T09:00:00+01:00",
        "2026-11-13T09:00:00+01:00",
    ]


def test_sources_merge_in_order_and_a_time_named_twice_fires_once() -> None:
    spec = Spec(
        ZoneInfo("UTC"),
        crons=("0 * * * *", "0 */2 * * *"),
        intervals=((3_600_000, 1_800_000),),
    )
    assert times(spec, "2026-01-01T00:00:00+00:00", 4) == [
        "2026-01-01T00:30:00+00:00",
        "2026-01-01T01:00:00+00:00",
        "2026-01-01T01:30:00+00:00",
        "2026-01-01T02:00:00+00:00",
    ]


def test_exclusions_remove_local_times() -> None:
    weekends = Exclusion(days_of_week=frozenset({5, 6}))
    new_year = Exclusion(dates=frozenset({"2026-01-02"}))
    spec = Spec(BERLIN, crons=("0 9 * * *",), exclusions=(weekends, new_year))
    assert times(spec, "2026-01-01T00:00:00+01:00", 3) == [
        "2026-01-01T09:00:00+01:00",  # Thursday; Friday the 2nd excluded, then the weekend
        "2026-01-05T09:00:00+01:00",
        "2026-01-06T09:00:00+01:00",
    ]


def test_start_and_end_bound_the_times() -> None:
    spec = Spec(
        ZoneInfo("UTC"),
        crons=("0 0 * * *",),
        start_ms=ms("2026-01-03T00:00:00+00:00"),
        end_ms=ms("2026-01-04T00:00:00+00:00"),
    )
    assert times(spec, "2026-01-01T00:00:00+00:00", 5) == [
        "2026-01-03T00:00:00+00:00",
        "2026-01-04T00:00:00+00:00",
    ]


def test_a_schedule_whose_exclusions_remove_everything_ends_instead_of_searching_forever() -> None:
    spec = Spec(ZoneInfo("UTC"), crons=("* * * * * *",), exclusions=(Exclusion(),))
    assert times(spec, "2026-01-01T00:00:00+00:00", 1) == []


def test_the_shipped_nightly_batch_schedule_runs_once_every_night_clock_changes_included() -> None:
    from wiggle.schedules import load_schedule_file

    root = Path(__file__).parents[3]
    shipped = load_schedule_file(root / "definitions/schedules/nightly-batch.schedule.yaml")
    assert times(shipped.spec, "2026-03-28T12:00:00+01:00", 2) == [
        "2026-03-29T03:00:00+02:00",  # 02:30 does not exist that night
        "2026-03-30T02:30:00+02:00",
    ]
    assert times(shipped.spec, "2026-10-24T12:00:00+02:00", 2) == [
        "2026-10-25T02:30:00+02:00",  # the first of the two 02:30s
        "2026-10-26T02:30:00+01:00",
    ]


@pytest.mark.parametrize("zone", ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe"])
@pytest.mark.parametrize("cron", ["*/20 * * * *", "30 1,2 * * *", "30 */10 * * * *"])
@pytest.mark.parametrize("repeated", ["first", "last", "both"])
def test_the_times_after_any_instant_are_those_a_search_from_days_before_finds_after_it(
    zone: str, cron: str, repeated: str
) -> None:
    """Where a search starts must not change what it finds: around each clock change of 2026,
    the times after an instant are exactly the ones a search begun two days earlier finds
    after it. A search that starts too late loses times the clocks moved back over; one that
    yields a time before every earlier one is in loses the order."""
    spec = Spec(ZoneInfo(zone), crons=(cron,), skipped="after", repeated=repeated)
    step = 25 * 60_000 + 7_000  # off-beat: lands on many minutes of the hours around a change
    for change in ("2026-03-29", "2026-04-05", "2026-10-04", "2026-10-25", "2026-11-01"):
        first = ms(f"{change}T00:00:00+00:00") - 12 * 3_600_000
        reference = list(nominal_times(spec, first - 2 * 86_400_000, until_ms=first + 86_400_000))
        assert reference == sorted(set(reference))
        for after in range(first, first + 86_400_000, step):
            until = min(after + 6 * 3_600_000, first + 86_400_000)
            found = list(nominal_times(spec, after, until_ms=until))
            assert found == [t for t in reference if after < t <= until], (change, after)
