"""Schedules in the engine (docs/schedules.md), on a virtual clock, on each database: each
nominal time fires once, as the instance `<schedule>-<nominal time>`, in the transaction that
records it; catch-up, overlap, pause and trigger do what the document says."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from wiggle.compiler import load_flow
from wiggle.engine import Engine, InstanceStatus, VirtualClock
from wiggle.engine.ops.schedules import ScheduleNotFound
from wiggle.errors import DefinitionNotFound, InputRejected
from wiggle.schedules import load_schedule

HOUR = 3_600_000
START = int(datetime(2026, 1, 1, tzinfo=UTC).timestamp() * 1000)
WAIT = load_flow("wiggle: 1\nname: waits\nsteps:\n  - await: go\n")
QUICK = load_flow(
    "wiggle: 1\nname: quick\ninput:\n  type: object\n  required: [kind]\nsteps:\n  - sleep: 1s\n"
)


def schedule(body: str) -> object:
    return load_schedule("schedule: s\n" + body, "s.yaml")


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(START)


@pytest.fixture
def eng(database_url: str, clock: VirtualClock):
    engine = Engine(database_url, clock=clock, leader_ttl_s=3600.0)
    engine.register(WAIT)
    engine.register(QUICK)
    try:
        yield engine
    finally:
        engine.close()


def hours(engine: Engine, clock: VirtualClock, n: int, *, tick: bool = True) -> None:
    for _ in range(n):
        clock.advance(HOUR)
        if tick:
            engine.tick()


def started(engine: Engine) -> list[str]:
    view = engine.describe_schedule("s", recent=100)
    return sorted(f.instance_id for f in view.recent if f.outcome == "STARTED" and f.instance_id)


def test_each_nominal_time_fires_once_as_its_own_instance(eng: Engine, clock: VirtualClock) -> None:
    eng.apply_schedule(schedule("flow: quick\ncron: '0 * * * *'\ninput: {kind: hourly}\n"))
    hours(eng, clock, 3)
    eng.tick()  # a second tick at the same time fires nothing more
    assert started(eng) == ["s-20260101T010000Z", "s-20260101T020000Z", "s-20260101T030000Z"]
    view = eng.describe(started(eng)[0])
    # Its 1 s sleep fell due at a later tick.
    assert view.status is InstanceStatus.COMPLETED and view.input == {"kind": "hourly"}
    assert eng.schedule_of_instance("s-20260101T020000Z") == ("s", START + 2 * HOUR)
    assert eng.describe_schedule("s").fired == 3


def test_after_an_outage_latest_runs_once(eng: Engine, clock: VirtualClock) -> None:
    eng.apply_schedule(
        schedule("flow: quick\ncron: '0 * * * *'\ninput: {kind: x}\ncatch_up: {missed: latest}\n")
    )
    hours(eng, clock, 6, tick=False)
    clock.advance(30 * 60_000)  # back at 06:30: every fire is missed
    eng.tick()
    assert started(eng) == ["s-20260101T060000Z"]
    skipped = [f for f in eng.describe_schedule("s").recent if f.outcome == "SKIPPED"]
    assert sum(f.count for f in skipped) == 5


def test_after_an_outage_all_runs_each_and_none_runs_none(eng: Engine, clock: VirtualClock) -> None:
    # allow_all: the missed fires start together (under skip, the first would still run).
    eng.apply_schedule(
        schedule(
            "flow: quick\ncron: '0 * * * *'\ninput: {kind: x}\ncatch_up: {missed: all}\n"
            "overlap: allow_all\n"
        )
    )
    hours(eng, clock, 6, tick=False)
    clock.advance(30 * 60_000)
    eng.tick()
    assert len(started(eng)) == 6
    eng.apply_schedule(
        schedule("flow: quick\ncron: '0 * * * *'\ninput: {kind: x}\ncatch_up: {missed: none}\n")
    )
    hours(eng, clock, 3, tick=False)
    eng.tick()
    # 07:00 and 08:00 were missed; 09:00 is 30 minutes late: missed too.
    assert len(started(eng)) == 6


def test_overlap_skip_and_buffer_one(eng: Engine, clock: VirtualClock) -> None:
    eng.apply_schedule(schedule("flow: waits\ncron: '0 * * * *'\n"))
    hours(eng, clock, 2)
    assert started(eng) == ["s-20260101T010000Z"]  # 02:00 skipped: 01:00 still waits
    reasons = [f.reason for f in eng.describe_schedule("s").recent if f.outcome == "SKIPPED"]
    assert reasons == ["overlap: s-20260101T010000Z is still running"]
    eng.apply_schedule(schedule("flow: waits\ncron: '0 * * * *'\noverlap: buffer_one\n"))
    hours(eng, clock, 2)  # 03:00 buffered, 04:00 skipped (one is buffered already)
    assert eng.describe_schedule("s").buffered == 1
    eng.signal("s-20260101T010000Z", "go", {})
    eng.tick()  # the running one ended: the buffered 03:00 starts
    assert started(eng) == ["s-20260101T010000Z", "s-20260101T030000Z"]
    assert eng.describe_schedule("s").buffered == 0


def test_cancel_running(eng: Engine, clock: VirtualClock) -> None:
    eng.apply_schedule(schedule("flow: waits\ncron: '0 * * * *'\noverlap: cancel_running\n"))
    hours(eng, clock, 2)
    assert eng.describe("s-20260101T010000Z").status is InstanceStatus.CANCELLED
    assert eng.describe("s-20260101T020000Z").status is InstanceStatus.RUNNING


def test_pause_skips_and_unpause_goes_on_from_now(eng: Engine, clock: VirtualClock) -> None:
    eng.apply_schedule(schedule("flow: quick\ncron: '0 * * * *'\ninput: {kind: x}\n"))
    eng.pause_schedule("s", "maintenance")
    hours(eng, clock, 3)
    assert started(eng) == [] and eng.describe_schedule("s").note == "maintenance"
    clock.advance(10 * 60_000)
    eng.unpause_schedule("s")
    hours(eng, clock, 1)
    assert started(eng) == ["s-20260101T040000Z"]
    assert eng.describe_schedule("s").skipped == 3


def test_trigger_fires_now_once(eng: Engine, clock: VirtualClock) -> None:
    eng.apply_schedule(schedule("flow: quick\ncron: '0 0 1 1 *'\ninput: {kind: x}\n"))
    clock.advance(90_500)
    fire = eng.trigger_schedule("s")
    assert fire["outcome"] == "STARTED" and fire["instance_id"] == "s-20260101T000130Z"


def test_input_values_see_the_nominal_time(eng: Engine, clock: VirtualClock) -> None:
    eng.apply_schedule(
        schedule(
            "flow: quick\ncron: '30 2 * * *'\ntime_zone: Europe/Berlin\ninput: {kind: daily}\n"
            'input_values: {day: "instance.nominal_time.substring(0, 10)"}\n'
        )
    )
    hours(eng, clock, 2)
    (ident,) = started(eng)
    assert ident == "s-20260101T013000Z"  # 02:30 in Berlin is 01:30 UTC in winter
    assert eng.describe(ident).input == {"kind": "daily", "day": "2026-01-01"}


def test_a_new_document_never_fires_a_decided_time_again(eng: Engine, clock: VirtualClock) -> None:
    eng.apply_schedule(schedule("flow: quick\ncron: '0 * * * *'\ninput: {kind: a}\n"))
    hours(eng, clock, 1)
    applied = eng.apply_schedule(schedule("flow: quick\ncron: '0 * * * *'\ninput: {kind: b}\n"))
    assert applied.changed == ("input",)
    eng.tick()
    hours(eng, clock, 1)
    assert started(eng) == ["s-20260101T010000Z", "s-20260101T020000Z"]
    assert eng.describe("s-20260101T020000Z").input == {"kind": "b"}


def test_bad_schedules_are_refused_when_applied(eng: Engine) -> None:
    with pytest.raises(DefinitionNotFound):
        eng.apply_schedule(schedule("flow: nope\ncron: '0 * * * *'\n"))
    with pytest.raises(InputRejected):
        eng.apply_schedule(schedule("flow: quick\ncron: '0 * * * *'\ninput: {}\n"))
    assert eng.list_schedules() == []
    with pytest.raises(ScheduleNotFound):
        eng.describe_schedule("s")


def test_the_next_due_fire_wakes_the_ticker(eng: Engine, clock: VirtualClock) -> None:
    eng.apply_schedule(schedule("flow: quick\ncron: '0 * * * *'\ninput: {kind: x}\n"))
    assert eng.next_due_ms() == START + HOUR


def run_batch(eng: Engine, batch_id: str) -> object:
    for _ in range(100):
        eng.tick()
        batch = eng.get_batch(batch_id)
        if batch.state == "DONE":
            return batch
    raise AssertionError(f"batch {batch_id} did not finish: {eng.get_batch(batch_id)}")


def test_backfill_fires_each_past_time_once_and_leaves_decided_ones(
    eng: Engine, clock: VirtualClock
) -> None:
    clock.advance(10 * HOUR)  # the schedule is applied at 10:00: nothing before fires by itself
    eng.apply_schedule(schedule("flow: quick\ncron: '0 * * * *'\ninput: {kind: x}\n"))
    preview = eng.preview_backfill("s", START + 2 * HOUR, START + 5 * HOUR)
    assert [n // HOUR - START // HOUR for n in preview.nominal_ms] == [2, 3, 4, 5]
    batch = eng.start_backfill("s", START + 2 * HOUR, START + 5 * HOUR)
    assert batch.action == "backfill" and batch.matched == 4
    done = run_batch(eng, batch.batch_id)
    assert done.done == 4 and done.skipped == 0
    assert started(eng) == [f"s-20260101T0{h}0000Z" for h in (2, 3, 4, 5)]
    # Again over a wider range: only the times not yet decided.
    again = eng.preview_backfill("s", START + 1 * HOUR, START + 6 * HOUR)
    assert again.already == 4 and len(again.nominal_ms) == 2
    run_batch(eng, eng.start_backfill("s", START + HOUR, START + 6 * HOUR).batch_id)
    assert len(started(eng)) == 6
    assert all(f.triggered for f in eng.describe_schedule("s", recent=100).recent)


def test_a_backfill_refuses_what_cannot_be_done(eng: Engine, clock: VirtualClock) -> None:
    from wiggle.errors import InvalidRequest

    clock.advance(HOUR)
    eng.apply_schedule(schedule("flow: quick\ncron: '* * * * * *'\ninput: {kind: x}\n"))
    with pytest.raises(InvalidRequest, match="more than 10000 nominal times"):
        eng.preview_backfill("s", START - 10 * 365 * 24 * HOUR, START)  # ten years at a second
    with pytest.raises(InvalidRequest, match="in the future"):
        eng.preview_backfill("s", START, START + 2 * HOUR)
    with pytest.raises(InvalidRequest, match="before its start"):
        eng.preview_backfill("s", START, START - HOUR)
    with pytest.raises(InvalidRequest, match="overlap"):
        eng.start_backfill("s", START, START + 1000, overlap="buffer_all")
    with pytest.raises(ScheduleNotFound):
        eng.preview_backfill("nope", START, START)


def test_a_backfill_with_overlap_skip_waits_for_nobody_and_skips(
    eng: Engine, clock: VirtualClock
) -> None:
    clock.advance(10 * HOUR)
    eng.apply_schedule(schedule("flow: waits\ncron: '0 * * * *'\n"))
    eng.trigger_schedule("s")  # its instance waits for a signal: the schedule's running one
    batch = eng.start_backfill("s", START + HOUR, START + 2 * HOUR, overlap="skip")
    done = run_batch(eng, batch.batch_id)
    assert done.skipped == 2
    assert all("is still running" in item.message for item in done.items)
