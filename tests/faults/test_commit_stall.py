"""Commits a synchronous standby never acknowledges: answered UNAVAILABLE within seconds.

A primary whose one synchronous standby is stopped (pgpair.py) holds every COMMIT until the
standby is back, without an error: Patroni's `synchronous_mode_strict` does exactly this when the
last replica goes (test_patroni.py runs that on the cluster). The engine must not hold its callers
meanwhile: a write in flight is answered UNAVAILABLE within STALL_S + PROBE_S (store/stall.py),
writes begun during the stall at once, the condition is one log line and its end another, and
everything works again by itself when the standby returns. The write that was cut was not lost
or doubled: the standby's return committed it, and its retry (same instance id) finds it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from faultkit import linear_flow
from pgpair import PostgresPair

from tests.waiting import wait_until
from wiggle.compiler import load_flow
from wiggle.engine import Engine
from wiggle.engine.store.stall import PROBE_S, STALL_S
from wiggle.errors import Unavailable

pytestmark = pytest.mark.timeout(300)

#: What the stall's answer may take beyond STALL_S + PROBE_S (a loaded machine, the guard's
#: quarter-second look, a question to the database).
SLACK_S = 5.0


@pytest.fixture
def engine_on_pair() -> Iterator[tuple[PostgresPair, Engine]]:
    pg = PostgresPair()
    engine = None
    try:
        pg.create_database("wiggle_stall")
        engine = Engine(pg.url("wiggle_stall"), leader_ttl_s=2.0)
        yield pg, engine
    finally:
        if engine is not None:
            engine.close()
        pg.close()


def _bounded(fn: Callable[[], Any], timeout: float) -> tuple[float, dict[str, Any]]:
    """Run `fn` on a thread of its own for up to `timeout` s: (seconds taken, {"value"} or
    {"error"}, or {} when it was still running)."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:
            out["error"] = exc

    began = time.monotonic()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    return time.monotonic() - began, out


def test_stalled_commits_are_answered_unavailable_and_resume(engine_on_pair, caplog):
    pg, engine = engine_on_pair
    caplog.set_level(logging.WARNING)
    flow = load_flow(linear_flow("stall", "SERVER", steps=1).encode())
    engine.register(flow)
    engine.start("stall", {}, instance_id="before")

    pg.stop_standby()
    bound = STALL_S + PROBE_S + SLACK_S
    took, out = _bounded(lambda: engine.start("stall", {}, instance_id="cut"), bound + 10)
    assert out, f"a start was still waiting for its COMMIT after {took:.1f} s"
    assert isinstance(out.get("error"), Unavailable), out
    assert took < bound, f"answered after {took:.1f} s"

    took, out = _bounded(lambda: engine.start("stall", {}, instance_id="during"), 10)
    assert isinstance(out.get("error"), Unavailable), out
    assert took < 1.0, f"a write begun during the stall took {took:.1f} s to be refused"
    assert engine.describe("before").instance_id == "before"  # reads go on

    pg.start_standby()
    wait_until(
        lambda: _started(engine, "after"),
        60,
        "a start answered once the standby is back",
        interval=0.2,
    )
    # The cut start committed when the standby acknowledged it: its retry finds it.
    assert engine.start("stall", {}, instance_id="cut").created is False
    # Two lines in all: none per refusal, none from psycopg for the pipeline the cut broke.
    lines = [f"{r.name}: {r.getMessage()}" for r in caplog.records]
    assert len(lines) == 2, lines
    assert lines[0].startswith("wiggle.engine: commits are not coming back"), lines
    assert "wait for a synchronous standby" in lines[0], lines
    assert lines[1].startswith("wiggle.engine: commits come back again after"), lines


def _started(engine: Engine, instance: str) -> bool:
    try:
        engine.start("stall", {}, instance_id=instance)
    except Unavailable:
        return False
    return True
