"""The embedded worker's kill is as sharp as a process's: a step's trace line is either written
before the kill returns or never (a late-landing kill is then seen as late and the run tried
again, instead of a step that seems to have run after its worker died)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from wiggle.conformance import _activities, build_registry
from wiggle.conformance._embedded_worker import _Killed, _Life
from wiggle.graph import ExecutionMode
from wiggle.worker import StepInfo
from wiggle.worker._context import running

INFO = StepInfo("i1", "d", 1, "f", "sha256:0", "append", ExecutionMode.LOCAL_ASYNC, "t1")


class _SaysWhenHeld:
    """A lock that sets `held` when an acquire has to wait for another thread's release."""

    def __init__(self, held: threading.Event) -> None:
        self._lock = threading.Lock()
        self._held = held

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if self._lock.acquire(blocking=False):
            return True
        if not blocking:
            return False
        self._held.set()
        return self._lock.acquire(True, timeout)

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_a_step_past_the_gate_is_traced_before_the_kill_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Run 75 (a clean-clone run of the test command): crash/kill-mid-chain in LOCAL_ASYNC with
    # the embedded worker failed on "step d ran 2 times": d had passed the gate before the kill
    # but wrote its trace line after the runner counted the lines at the kill, so the kill did
    # not look late. Here the step writes its line only once the kill has either returned (and
    # the lines were counted) or is held waiting for the step's lock.
    trace = tmp_path / "trace.jsonl"
    real_trace = _activities._trace
    between = threading.Event()
    settled = threading.Event()  # the kill returned, or waits for the lock the step holds

    def late_trace(activity: str, path: str | None = None) -> None:
        between.set()
        assert settled.wait(10), "the kill neither returned nor waited"
        real_trace(activity, path)

    monkeypatch.setattr(_activities, "_trace", late_trace)
    life = _Life()
    life._cond = threading.Condition(_SaysWhenHeld(settled))
    activity = build_registry(str(trace), gate=life.gate).get("append")
    assert activity is not None
    results: list[Any] = []

    def step() -> None:
        with running(INFO):
            results.append(activity.fn({}))

    runner = threading.Thread(target=step)
    runner.start()
    assert between.wait(10)
    life.kill()
    at_kill = _lines(trace)
    settled.set()
    runner.join(10)
    assert len(at_kill) == 1, "the step began before the kill: its line is there when it returns"
    assert results == [{"trail": ["d"]}]

    # A step after the kill does not begin: no line, and it fails before it traces.
    with running(INFO), pytest.raises(_Killed):
        activity.fn({})
    assert len(_lines(trace)) == 1
