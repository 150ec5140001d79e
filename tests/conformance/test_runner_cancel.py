"""A cancel aimed at a step in flight, through the real runner, server and Python worker: one that
reached the server only after the step had been reported (the machine delayed it) spoils the
run, which is tried again; one that reached it in time and that the engine ignored fails."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import pytest

from wiggle.client import Client
from wiggle.conformance import PYTHON_WORKER, RunnerOptions, load_cases, run_corpus
from wiggle.conformance._check import RunResult
from wiggle.engine import Engine, InstanceStatus

pytestmark = pytest.mark.timeout(300)

CLEANUP = "conformance cleanup"


def run_cancel_running() -> RunResult:
    (result,) = run_corpus(
        load_cases("cancel/running"),
        RunnerOptions(
            modes=["LOCAL_SYNC"], databases=["sqlite"], worker=PYTHON_WORKER, verbose=True
        ),
    )
    return result


def test_a_cancel_that_reached_the_server_after_the_step_ended_is_tried_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The runner sends the first try's cancel while the step holds; it reaches the server only
    # once the instance has ended, as a starved client or a retried attempt would deliver it.
    send = Client.cancel
    delayed = threading.Event()

    def late(self: Client, instance_id: str, reason: str = "") -> Any:
        if reason != CLEANUP and not delayed.is_set():
            delayed.set()
            # Up to a minute: the instance ends once its step has held (WaitInstance answers
            # the moment it does).
            with contextlib.suppress(TimeoutError):  # then it is sent anyway
                self.wait(instance_id, timeout=60)
        return send(self, instance_id, reason)

    monkeypatch.setattr(Client, "cancel", late)
    result = run_cancel_running()
    assert delayed.is_set()
    assert result.problems == [], result.problems
    assert result.status == "CANCELLED"
    assert result.notes[:1] == [
        "try 1 spoiled: the cancel at started:slow landed after slow ended (slow had been reported)"
    ], result.notes


def test_a_cancel_sent_in_time_that_the_engine_ignores_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ignored: list[str] = []

    def ignore(self: Engine, instance_id: str, reason: str = "") -> InstanceStatus:
        if reason == CLEANUP:
            return cancel(self, instance_id, reason)
        ignored.append(instance_id)
        return InstanceStatus.RUNNING

    cancel = Engine.cancel
    monkeypatch.setattr(Engine, "cancel", ignore)
    result = run_cancel_running()
    assert len(ignored) == 1  # judged on the one try: nothing spoiled it
    assert result.spoiled is None
    assert "status COMPLETED (); expected CANCELLED" in result.problems, result.problems
    assert "step after ran 1 times; expected it not to run" in result.problems
    assert not any("not judged" in p for p in result.problems)
