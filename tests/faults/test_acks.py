"""The acknowledged-steps ledger (acks.py) names the step a report applied, and only that."""

from __future__ import annotations

from acks import Standing, ack_lines


def test_a_fresh_report_is_noted_with_the_step_it_completes() -> None:
    at = {"t1": Standing("i1", "s1", 2, "LEASED", "L", 0)}
    lines = ack_lines([("t1", "L", 1, ["s2"])], at, [True])
    assert lines == ["acked t1 L 1 0 i1 s1 2", "acked t1 L 1 1 i1 s2 1"]


def test_a_report_sent_again_is_not_noted_as_the_step_the_task_reached_since() -> None:
    # The first copy of s3's report committed but its answer was lost; when the copy sent
    # again arrives, the task stands at `end`. The answer is about s3, not `end`.
    at = {"t1": Standing("i1", "end", 1, "DONE", None, 0)}
    assert ack_lines([("t1", "L", 1, [])], at, [True]) == ["answered-again t1 L 1"]


def test_a_checkpoint_sent_again_under_a_lease_still_held_is_not_noted_twice() -> None:
    # LOCAL_ASYNC: report 2 of a run committed; its copy arrives with the token still leased.
    at = {"t1": Standing("i1", "s3", 1, "LEASED", "L", 2)}
    assert ack_lines([("t1", "L", 2, ["s4"])], at, [True]) == ["answered-again t1 L 2"]
    assert ack_lines([("t1", "L", 3, [])], at, [True]) == ["acked t1 L 3 0 i1 s3 1"]


def test_refused_and_unknown_reports_are_not_noted() -> None:
    at = {"t1": Standing("i1", "s1", 1, "LEASED", "L", 0)}
    assert ack_lines([("t1", "L", 1, []), ("t9", "L", 1, []), None], at, [False, True, True]) == []
    # A report under a lease the task no longer holds (it ran out; another worker has it).
    assert ack_lines([("t1", "old", 1, [])], at, [True]) == ["answered-again t1 old 1"]
