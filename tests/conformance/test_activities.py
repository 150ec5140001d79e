"""The Python conformance activities against ACTIVITIES.md, without a server."""

from __future__ import annotations

import json

import pytest

from wiggle.conformance import build_registry
from wiggle.graph import ExecutionMode
from wiggle.worker import NonRetryable, StepInfo
from wiggle.worker._context import running


def call(name: str, ctx, node: str = "n1", attempt: int = 1, trace=None, monkeypatch=None):
    info = StepInfo("i1", node, attempt, "f", "sha256:0", name, ExecutionMode.SERVER, "t1")
    activity = build_registry().get(name)
    assert activity is not None
    with running(info):
        return activity.fn(ctx)


def test_tasks():
    assert call("noop", [1, None]) == [1, None]
    assert call("append", {"trail": ["x"], "k": 1}, node="b") == {"trail": ["x", "b"], "k": 1}
    assert call("append", {}, node="a") == {"trail": ["a"]}
    assert call("inc", {}) == {"n": 1}
    assert call("inc_m", {"m": 4}) == {"m": 5}
    assert call("zero", {"n": 9}) == {"n": 0}
    assert call("double", -3) == -6


def test_fail_times_counts_attempts_per_node():
    ctx = {"fail_times": {"f": 2}}
    for attempt in (1, 2):
        with pytest.raises(RuntimeError, match=f"planned failure f attempt {attempt}"):
            call("fail_times", ctx, node="f", attempt=attempt)
    assert call("fail_times", ctx, node="f", attempt=3) == {**ctx, "trail": ["f"]}
    assert call("fail_times", ctx, node="other") == {**ctx, "trail": ["other"]}


def test_failures():
    with pytest.raises(RuntimeError, match="failure b attempt 2"):
        call("fail_always", {}, node="b", attempt=2)
    with pytest.raises(NonRetryable, match="fatal boom"):
        call("fail_fatal", {}, node="boom")
    with pytest.raises(NonRetryable, match="append needs an object"):
        call("append", 3)


def test_predicates():
    assert call("is_true", {"go": True}, node="go") is True
    assert call("is_true", {"go": 1}, node="go") is False  # only JSON true
    assert call("is_true", 5, node="go") is False
    assert call("lt", {"n": 1, "limit": 2}) is True
    assert call("lt", {}) is False
    assert call("lt_m", {"m": 2, "limit_m": 2}) is False
    assert call("is_even", 4) is True
    assert call("is_even", True) is False


def test_combines_and_apply():
    assert call("merge_results", {"context": {"a": 1}, "results": {"x": 2}}) == {
        "a": 1,
        "results": {"x": 2},
    }
    assert call("sum_results", {"context": {}, "results": [1, {"n": 2}, {"m": 9}]}) == {"sum": 3}
    assert call("sum_results", {"context": {}, "results": {"a": 4}}) == {"sum": 4}
    assert call("apply_signal", {"context": {"signals": [1]}, "signal": None}) == {
        "signals": [1, None]
    }


def test_hold_sleeps_then_appends():
    assert call("hold", {"hold_ms": 20}, node="h") == {"hold_ms": 20, "trail": ["h"]}


def test_hold_ends_on_time_when_every_slice_oversleeps(monkeypatch):
    """A loaded machine wakes each 50 ms slice late. The hold must still end hold_ms after it
    began (one slice late at most), not a slice's oversleep for each of its slices: the lease
    cases' margins (lease/cancel-stops-the-run) are computed on the hold's length, and a
    worker that ignored a lost lease passed once because a 3 s hold took over 4 s."""
    from wiggle.conformance import _activities

    clock = [1000.0]
    monkeypatch.setattr(_activities.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(
        _activities.time, "sleep", lambda s: clock.__setitem__(0, clock[0] + s + 0.03)
    )
    call("hold", {"hold_ms": 3000}, node="h")
    assert 3.0 <= clock[0] - 1000.0 <= 3.0 + 0.05 + 0.03


def test_every_invocation_writes_one_trace_line_first(tmp_path, monkeypatch):
    trace = tmp_path / "trace.jsonl"
    monkeypatch.setenv("WIGGLE_CONFORMANCE_TRACE", str(trace))
    call("append", {}, node="a", attempt=2)
    with pytest.raises(NonRetryable):
        call("fail_fatal", {}, node="b")
    lines = [json.loads(line) for line in trace.read_text().splitlines()]
    assert lines == [
        {"instance_id": "i1", "flow": "f", "node_id": "a", "activity": "append", "attempt": 2},
        {"instance_id": "i1", "flow": "f", "node_id": "b", "activity": "fail_fatal", "attempt": 1},
    ]
