"""Schedule documents (wiggle.schedules._load): a valid one becomes a Schedule; every problem of
an invalid one is reported at its line and column, all in one pass."""

from __future__ import annotations

from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from wiggle.errors import FlowError
from wiggle.schedules._load import load_schedule, schedule_schema

REPO = Path(__file__).parents[3]


def problems(text: str) -> list[str]:
    with pytest.raises(FlowError) as caught:
        load_schedule(text, "s.yaml")
    return [str(d) for d in caught.value.diagnostics]


def test_the_package_schema_is_the_spec_schema() -> None:
    spec = REPO / "spec" / "schema" / "schedule.schema.json"
    package = REPO / "wiggle" / "schedules" / "schema" / "schedule.schema.json"
    assert package.read_bytes() == spec.read_bytes()
    Draft202012Validator.check_schema(schedule_schema())


def test_a_valid_schedule() -> None:
    schedule = load_schedule(
        """\
schedule: nightly-batch
flow: nightly-batch
time_zone: Europe/Berlin
cron: "30 2 * * *"
calendar: [{days_of_week: [mon-fri], hours: [9, "17-18"], minutes: [15]}]
interval: [{every: 6h, offset: 30m}]
except: [{dates: ["2026-12-24"]}, {months: [12], days_of_month: [25]}]
jitter: 5m
dst: {skipped: skip, repeated: both}
overlap: buffer_one
catch_up: {missed: all, window: 1d, at_most: 3}
input: {batch: nightly}
input_values: {date: "instance.nominal_time.substring(0, 10)"}
""",
        "s.yaml",
    )
    assert schedule.name == "nightly-batch" and schedule.version is None
    spec = schedule.spec
    assert spec.zone.key == "Europe/Berlin" and spec.crons == ("30 2 * * *",)
    (calendar,) = spec.calendars
    assert calendar.days_of_week == {0, 1, 2, 3, 4} and calendar.hours == {9, 17, 18}
    assert spec.intervals == ((6 * 3_600_000, 30 * 60_000),)
    assert spec.exclusions[0].dates == {"2026-12-24"}
    assert spec.jitter_ms == 300_000 and (spec.skipped, spec.repeated) == ("skip", "both")
    assert schedule.overlap == "buffer_one"
    assert (schedule.catch_up.missed, schedule.catch_up.window_ms) == ("all", 86_400_000)
    assert schedule.input_values == (("date", "instance.nominal_time.substring(0, 10)"),)


def test_aliases_and_six_fields() -> None:
    schedule = load_schedule("schedule: a\nflow: f\ncron: ['@daily', '*/10 * * * * *']\n", "s.yaml")
    assert schedule.spec.crons == ("0 0 * * *", "*/10 * * * * *")


def test_every_problem_at_its_place() -> None:
    found = problems(
        """\
schedule: bad
flow: f
time_zone: Mars/Olympus
cron: ["61 * * * *", "* * *", "@sometimes", "0 0 30 2 *"]
interval: [{every: 0s}, {every: 1500ms}, {every: 1h, offset: 2h}]
calendar: [{hours: [25], days_of_week: [fri-mon]}, {days_of_month: [31], months: [2]}]
start: 2027-01-01T00:00:00Z
end: 2026-01-01T00:00:00Z
catch_up: {at_most: 3}
input_values: {x: "ctx.(("}
"""
    )
    assert found == [
        "s.yaml:3:12: unknown time zone 'Mars/Olympus': use an IANA name such as "
        "Europe/Berlin or UTC",
        "s.yaml:4:8: cron '61 * * * *': a bad minute: minutes take 0-59",
        "s.yaml:4:22: cron '* * *' has 3 fields; write 5 (minute hour day-of-month month "
        "day-of-week) or 6 (seconds first)",
        "s.yaml:4:31: unknown cron alias '@sometimes': one of @yearly, @annually, @monthly, "
        "@weekly, @daily, @midnight, @hourly",
        "s.yaml:4:45: cron '0 0 30 2 *': a bad day-of-month: days of the month take 1-31 (and L), "
        "and must exist in some month",
        "s.yaml:5:20: duration '0s' must be greater than zero",
        "s.yaml:5:33: an interval is a whole number of seconds",
        "s.yaml:5:62: offset 2h is not shorter than every 1h",
        "s.yaml:6:21: hours take 0 to 23; 25 is out of range",
        "s.yaml:6:41: day range 'fri-mon' runs backwards; write it Monday first",
        "s.yaml:6:52: this calendar entry matches no day (a date no month has)",
        "s.yaml:8:6: end 2026-01-01T00:00:00Z is not after start 2027-01-01T00:00:00Z",
        "s.yaml:9:21: at_most applies only with missed: all",
        "s.yaml:10:19: Syntax error: no viable alternative at input '.(' (at 1:5 of 'ctx.((')",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("schedule: a\nflow: f\n", "s.yaml:1:1: "),  # no cron, interval or calendar
        ("schedule: a\nflow: f\ncron: '* * * * *'\novrlap: skip\n", "s.yaml:4:1: "),
        ("schedule: a\nflow: f\ncron: '* * * * *'\noverlap: sometimes\n", "s.yaml:4:10: "),
        ("schedule: Not Ok\nflow: f\ncron: '* * * * *'\n", "s.yaml:1:11: "),
        ("schedule: a\nflow: f\ncron: '* * * * *'\nversion: v2\n", "s.yaml:4:10: "),
    ],
)
def test_schema_problems_are_located(text: str, expected: str) -> None:
    found = problems(text)
    assert found and found[0].startswith(expected), found


def test_malformed_yaml_is_located() -> None:
    found = problems("schedule: a\nflow: [f\n")
    assert found[0].startswith("s.yaml:")
