"""The ticker under a database outage: one line when it starts, one when it is over, no
traceback for the outage itself; a bug (any other exception) gets its traceback, once."""

from __future__ import annotations

import logging
import threading

import pytest

from wiggle._trouble import Trouble
from wiggle.errors import Unavailable
from wiggle.server._ticker import Ticker


class ScriptedEngine:
    """An engine whose tick() raises each scripted exception in turn, then works; `done` is set
    once the script has run out and a tick has worked."""

    def __init__(self, script: list[BaseException], *, stalled: bool = False) -> None:
        self.script = list(script)
        self.done = threading.Event()
        self._woken = threading.Event()
        self.commits_stalled = stalled

    def tick(self) -> int:
        if self.script:
            raise self.script.pop(0)
        self.commits_stalled = False
        self.done.set()
        return 0

    def next_wakeup_s(self) -> float:
        return 0.01

    def wait_for_timers(self, timeout_s: float) -> None:
        self._woken.wait(0.001)  # the outage's one-second pause, shortened

    def wake(self) -> None:
        self._woken.set()


def _run(
    script: list[BaseException], caplog: pytest.LogCaptureFixture, *, stalled: bool = False
) -> list[logging.LogRecord]:
    caplog.set_level(logging.INFO, logger="wiggle.server")
    engine = ScriptedEngine(script, stalled=stalled)
    ticker = Ticker(engine)  # type: ignore[arg-type]
    ticker.start()
    try:
        assert engine.done.wait(30), "the ticker never got past the script"
    finally:
        ticker.stop()
    return [r for r in caplog.records if r.name == "wiggle.server"]


def test_a_database_outage_is_one_line_then_one_when_it_is_over(caplog) -> None:
    outage = [Unavailable("the database is unavailable: connection refused")] * 20
    records = _run(outage, caplog)
    assert [r.getMessage() for r in records] == [
        "tick failed (the database is unavailable: connection refused); retrying every 1 s",
        records[1].getMessage(),
    ]
    assert records[1].getMessage().startswith("ticking again after ")
    assert all(r.exc_info is None for r in records)


def test_ticks_refused_while_commits_stall_are_not_said_again(caplog) -> None:
    """The engine says once that commits stall (engine/store/stall.py) and refuses writes
    meanwhile; the ticker saying it too made two lines of one condition, and two of its end."""
    stalled = [Unavailable("the database does not finish commits (...); retry later")] * 5
    assert _run(stalled, caplog, stalled=True) == []


def test_a_bug_gets_its_traceback_once_per_kind(caplog) -> None:
    records = _run([KeyError("x")] * 5 + [ValueError("y")] * 5, caplog)
    errors = [r for r in records if r.levelno == logging.ERROR]
    assert [r.exc_info[0] for r in errors if r.exc_info] == [KeyError, ValueError]
    assert len(records) == 3  # the two bugs, then working again


def test_trouble_says_the_expected_failure_once_per_episode(caplog) -> None:
    caplog.set_level(logging.INFO)
    log = logging.getLogger("test.trouble")
    trouble = Trouble(log, down="down ({why})", up="up after {seconds:.0f} s", expected=(OSError,))
    for _ in range(3):
        trouble.failed(ConnectionResetError("reset"))
        trouble.failed(TimeoutError("timed out"))
    trouble.succeeded()
    trouble.succeeded()
    trouble.failed(OSError("again"))
    assert [r.getMessage() for r in caplog.records] == [
        "down (reset)",
        "up after 0 s",
        "down (again)",
    ]
    assert trouble.down
