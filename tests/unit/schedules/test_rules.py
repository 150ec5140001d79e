"""The firing rules (wiggle.schedules._rules): catch-up after an outage, overlap, jitter and the
id of the instance a nominal time starts."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from wiggle.schedules._model import CatchUp
from wiggle.schedules._rules import (
    GRACE_MS,
    catch_up,
    instance_id,
    jitter_ms,
    nominal_from_instance_id,
    overlap,
)

HOUR = 3_600_000
# A six-hour outage: hourly nominal times 1..6 passed unfired; the server is back at 6:00:10.
NOW = 6 * HOUR + 10_000
DUE = [(h * HOUR, h * HOUR) for h in range(1, 7)]


def fired(decisions: list) -> list[int]:
    return [d.nominal_ms // HOUR for d in decisions if d.fire]


def test_latest_runs_once_after_an_outage_the_fire_on_time() -> None:
    decisions = catch_up(DUE, NOW, CatchUp("latest"))
    assert fired(decisions) == [6]  # 6:00 is 10 s late: on time
    assert all(d.reason.startswith("missed") for d in decisions if not d.fire)


def test_latest_catches_up_the_newest_missed_when_none_is_on_time() -> None:
    decisions = catch_up(DUE, 6 * HOUR + 30 * 60_000, CatchUp("latest"))
    assert fired(decisions) == [6]
    assert len([d for d in decisions if not d.fire]) == 5


def test_all_runs_each_missed_fire_oldest_first() -> None:
    assert fired(catch_up(DUE, NOW, CatchUp("all"))) == [1, 2, 3, 4, 5, 6]


def test_all_with_at_most_runs_the_newest() -> None:
    # At most two of the missed (1..5) fire, the newest; 6:00 is on time and fires anyway.
    assert fired(catch_up(DUE, NOW, CatchUp("all", at_most=2))) == [4, 5, 6]


def test_none_runs_only_what_is_on_time() -> None:
    assert fired(catch_up(DUE, NOW, CatchUp("none"))) == [6]
    assert fired(catch_up(DUE, 7 * HOUR, CatchUp("none"))) == []


def test_the_window_skips_what_is_too_old() -> None:
    decisions = catch_up(DUE, NOW, CatchUp("all", window_ms=2 * HOUR + 30_000))
    assert fired(decisions) == [4, 5, 6]
    assert {d.reason for d in decisions if not d.fire} == {"missed, older than the catch-up window"}


def test_a_fire_within_the_grace_is_on_time_for_every_rule() -> None:
    due = [(0, 0)]
    for rule in ("latest", "all", "none"):
        assert fired(catch_up(due, GRACE_MS, CatchUp(rule))) == [0]


def test_jitter_is_measured_from_the_due_time() -> None:
    # Nominal 0, due at 50 s (jitter): at 100 s it is 50 s late, on time.
    assert fired(catch_up([(0, 50_000)], 100_000, CatchUp("none"))) == [0]


@pytest.mark.parametrize(
    ("policy", "running", "buffered", "expected"),
    [
        ("skip", False, 0, "start"),
        ("skip", True, 0, "skip"),
        ("buffer_one", True, 0, "buffer"),
        ("buffer_one", True, 1, "skip"),
        ("buffer_all", True, 3, "buffer"),
        ("cancel_running", True, 0, "cancel"),
        ("allow_all", True, 2, "start"),
        ("buffer_all", False, 1, "buffer"),  # the buffered ones go first
    ],
)
def test_overlap(policy: str, running: bool, buffered: int, expected: str) -> None:
    assert overlap(policy, running, buffered) == expected


def test_jitter_is_the_same_every_time_and_within_bounds() -> None:
    offsets = [jitter_ms("nightly", n * HOUR, 300_000) for n in range(200)]
    assert offsets == [jitter_ms("nightly", n * HOUR, 300_000) for n in range(200)]
    assert all(0 <= o < 300_000 for o in offsets)
    assert len(set(offsets)) > 150  # spread, not one value
    assert jitter_ms("nightly", 0, 0) == 0


def test_the_instance_id_names_the_schedule_and_the_nominal_time_in_utc() -> None:
    nominal = int(datetime(2026, 10, 19, 0, 30, tzinfo=UTC).timestamp() * 1000)
    assert instance_id("nightly-batch", nominal) == "nightly-batch-20261019T003000Z"
    assert nominal_from_instance_id("nightly-batch", "nightly-batch-20261019T003000Z") == nominal
    assert nominal_from_instance_id("nightly-batch", "nightly-batch-x") is None
    assert nominal_from_instance_id("nightly-batch", "other-20261019T003000Z") is None
