"""The step history: attempts of each step from the events the engine writes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from wiggle.console._history import step_history


@dataclass(frozen=True)
class Ev:
    at_ms: int
    kind: str
    node_id: str = ""
    attempt: int = 0
    detail: Any = None


def test_attempts_with_worker_times_errors_retries_and_lease_expiry():
    events = [
        Ev(0, "instance_started"),
        Ev(10, "step_started", "charge", 1, {"worker": "w1"}),
        Ev(60, "step_failed", "charge", 1, {"message": "bank offline", "error_type": "IOError"}),
        Ev(60, "step_retried", "charge", 2, {"delay_ms": 1000}),
        Ev(1100, "step_started", "charge", 2, {"worker": "w2"}),
        Ev(31100, "lease_expired", "charge", 2, {"worker": "w2"}),
        Ev(31100, "step_failed", "charge", 2, {"message": "lease expired", "error_type": "x"}),
        Ev(31100, "step_retried", "charge", 3, {"delay_ms": 2000}),
        Ev(33200, "step_started", "charge", 3, {"worker": "w1"}),
        Ev(33300, "step_completed", "charge", 3, {}),
        Ev(33400, "step_started", "ship", 1, {"worker": "w1"}),
    ]
    (charge, ship) = step_history(events)
    first, second, third = charge.attempts
    assert (first.outcome, first.worker, first.duration_ms) == ("failed", "w1", 50)
    assert (first.error_type, first.error, first.retry_in_ms) == ("IOError", "bank offline", 1000)
    assert (second.outcome, second.worker, second.retry_in_ms) == ("lease expired", "w2", 2000)
    assert (third.outcome, third.duration_ms, third.retry_in_ms) == ("completed", 100, None)
    (running,) = ship.attempts
    assert (running.outcome, running.started_ms, running.ended_ms) == ("running", 33400, 0)
    assert running.input is None and running.output is None  # not recorded by the engine yet


def test_steps_a_worker_chained_start_when_the_one_before_them_ended():
    events = [
        Ev(100, "step_started", "validate", 1, {"worker": "w1"}),
        Ev(150, "step_completed", "validate", 1, {}),
        Ev(180, "step_completed", "in_stock", 1, {"predicate": True}),
        Ev(200, "handed_back", "parallel-1", 0, {"reason": "fork"}),
        Ev(210, "step_started", "ocr", 1, {"worker": "w1"}),
        Ev(220, "step_started", "ocr", 1, {"worker": "w1"}),
        Ev(300, "step_completed", "ocr", 1, {"branch": "0"}),
        Ev(320, "step_completed", "classify", 1, {"branch": "0"}),
        Ev(400, "step_completed", "ocr", 1, {"branch": "1"}),
        Ev(410, "handed_back", "classify", 1, {"reason": "shutdown"}),
    ]
    validate, in_stock, ocr, classify = step_history(events)
    assert validate.last.chained is False and validate.last.duration_ms == 50
    assert (in_stock.last.started_ms, in_stock.last.chained, in_stock.last.predicate) == (
        150,
        True,
        True,
    )
    assert [(a.branch, a.started_ms, a.ended_ms) for a in ocr.attempts] == [
        ("0", 210, 300),
        ("1", 220, 400),
    ]
    done, given_back = classify.attempts
    assert (done.branch, done.started_ms, done.duration_ms) == ("0", 300, 20)
    assert (given_back.outcome, given_back.handed_back) == ("handed back", "shutdown")


def test_a_step_running_when_the_instance_was_cancelled_or_reset_is_cut_off_not_running():
    events = [
        Ev(100, "step_started", "ocr", 1, {"worker": "w1"}),
        Ev(110, "step_started", "ocr", 1, {"worker": "w2"}),
        Ev(150, "step_completed", "ocr", 1, {"branch": "0"}),
        Ev(200, "instance_reset", "ocr", 0, {"from": ["ocr"], "to": "ocr"}),
        Ev(210, "step_started", "ocr", 1, {"worker": "w1"}),
        Ev(400, "instance_cancelled", "", 0, {"reason": "cancelled: wrong file"}),
    ]
    (ocr,) = step_history(events)
    done, reset, cancelled = ocr.attempts
    assert (done.outcome, done.ended_ms) == ("completed", 150)
    assert (reset.outcome, reset.cut_off_by, reset.worker, reset.duration_ms) == (
        "cut off",
        "instance reset",
        "w2",
        90,
    )
    assert (cancelled.outcome, cancelled.cut_off_by, cancelled.duration_ms) == (
        "cut off",
        "instance cancelled",
        190,
    )


def test_a_branch_still_running_when_another_failed_the_instance_is_cut_off():
    events = [
        Ev(100, "step_started", "left", 1, {"worker": "w1"}),
        Ev(100, "step_started", "right", 1, {"worker": "w2"}),
        Ev(300, "step_failed", "left", 1, {"message": "boom", "error_type": "E"}),
        Ev(300, "instance_failed", "", 0, {"reason": "step left failed"}),
    ]
    left, right = step_history(events)
    assert left.last.outcome == "failed"
    assert (right.last.outcome, right.last.cut_off_by, right.last.ended_ms) == (
        "cut off",
        "instance failed",
        300,
    )


def test_starts_that_name_their_branch_pair_with_their_own_ends_and_keep_it_when_cut_off():
    events = [
        Ev(100, "step_started", "ocr", 1, {"worker": "w1", "branch": "0"}),
        Ev(110, "step_started", "ocr", 1, {"worker": "w2", "branch": "1"}),
        Ev(120, "step_started", "ocr", 1, {"worker": "w1", "branch": "2"}),
        # Item 1 ends first: it is paired with its own start, not the oldest one.
        Ev(200, "step_completed", "ocr", 1, {"branch": "1"}),
        Ev(300, "instance_cancelled", "", 0, {"reason": "cancelled"}),
    ]
    (ocr,) = step_history(events)
    assert [(a.branch, a.worker, a.outcome, a.ended_ms) for a in ocr.attempts] == [
        ("0", "w1", "cut off", 300),
        ("1", "w2", "completed", 200),
        ("2", "w1", "cut off", 300),
    ]
