"""The runner's judgement, without a server: JSON equality, step counts, mode agreement, the
trace reader."""

from __future__ import annotations

import pytest

from wiggle.conformance import Row, summarise
from wiggle.conformance._cases import MISSING, Count
from wiggle.conformance._check import RunResult, check_steps, compare_modes
from wiggle.conformance._trace import Trace
from wiggle.jsonvalue import json_equal


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        (1, 1.0, False),  # an integer and a non-integer are told apart: 4 is not 4.0
        (4.0, 4.0, True),
        (9007199254740993, 9007199254740992, False),
        (9007199254740993, 9007199254740993.0, False),
        (True, 1, False),
        (False, 0, False),
        (None, None, True),
        ({"a": [1, {"b": None}]}, {"a": [1, {"b": None}]}, True),
        ({"a": 1}, {"a": 1, "b": 2}, False),
        ([1, 2], [2, 1], False),
        ("1", 1, False),
    ],
)
def test_json_equal(a, b, equal):
    assert json_equal(a, b) is equal


def test_check_steps_exact_bounds_and_unexpected():
    expected = {"a": Count(1, 1), "b": Count(1, 2), "c": Count(0, 1)}
    assert check_steps(expected, {"a": 1, "b": 2}) == []
    assert check_steps(expected, {"a": 2, "b": 3, "d": 1}) == [
        "step a ran 2 times; expected 1",
        "step b ran 3 times; expected 1..2",
        "step d ran 1 times; expected it not to run",
    ]


def _result(mode, status="COMPLETED", context=MISSING, steps=None, optional=frozenset()):
    return RunResult(
        "c", 0, mode, "sqlite", status=status, context=context, steps=steps or {}, optional=optional
    )


def test_modes_must_agree_on_status_context_and_steps():
    same = [_result(m, context={"x": 1}, steps={"a": 1}) for m in ("SERVER", "LOCAL_SYNC")]
    assert compare_modes(same) == []
    problems = compare_modes(
        [
            _result("SERVER", context={"x": 1}, steps={"a": 1}),
            _result("LOCAL_ASYNC", status="FAILED", context={"x": 2}, steps={"a": 2, "b": 1}),
        ]
    )
    assert len(problems) == 3
    assert "only in LOCAL_ASYNC ['b']" in problems[2]


def test_a_step_allowed_not_to_run_is_left_out_of_the_agreement():
    results = [
        _result("SERVER", steps={"a": 1}, optional=frozenset({"b"})),
        _result("LOCAL_SYNC", steps={"a": 1, "b": 1}, optional=frozenset({"b"})),
    ]
    assert compare_modes(results) == []


def test_summarise_counts_rows_and_agreement():
    results = [_result("SERVER", steps={"a": 1}), _result("LOCAL_SYNC", steps={"a": 2})]
    results[1].problems.append("step a ran 2 times; expected 1")
    rows = summarise(results)
    # The set of steps run is the same in both modes; the counts are each case's own business.
    assert sorted((r.mode, r.passed) for r in rows) == [
        ("(modes agree)", True),
        ("LOCAL_SYNC", False),
        ("SERVER", True),
    ]
    assert all(isinstance(r, Row) for r in rows)


def test_the_trace_reader_keeps_partial_lines_and_skips_torn_ones(tmp_path):
    path = tmp_path / "trace.jsonl"
    trace = Trace(path)
    line = b'{"instance_id":"i","flow":"f","node_id":"a","activity":"append","attempt":1}'
    with path.open("ab") as f:
        f.write(line + b"\n" + line[:20])
    assert trace.refresh() == 1
    with path.open("ab") as f:
        f.write(line[20:] + b"\n" + b"{torn\n")
    assert trace.refresh() == 2
    assert [(t.seq, t.node_id) for t in trace.since(1)] == [(1, "a")]


def test_retry_delays_are_judged_from_the_step_retried_events():
    from types import SimpleNamespace

    from wiggle.conformance._check import check_retry_delays

    def retried(node: str, delay: int) -> SimpleNamespace:
        return SimpleNamespace(kind="step_retried", node_id=node, detail={"delay_ms": delay})

    other = SimpleNamespace(kind="step_failed", node_id="a", detail={"message": "x"})
    events = [other, retried("a", 50), other, retried("a", 100), retried("b", 10)]
    assert check_retry_delays({"a": [50, 100]}, events) == []
    assert check_retry_delays({"a": [50, 200], "c": []}, events) == [
        "retries of a waited [50, 100] ms; expected [50, 200]"
    ]
    # A node expected to retry that never did, and one expected never to retry that did.
    assert check_retry_delays({"c": [50], "b": []}, events) == [
        "retries of b waited [10] ms; expected []",
        "retries of c waited [] ms; expected [50]",
    ]
