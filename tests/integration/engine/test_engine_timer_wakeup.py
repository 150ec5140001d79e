"""A timer armed in this process wakes the ticker's sleep, so timers fire on time."""

from __future__ import annotations

import threading

from wiggle.engine import Engine

from .engine_testkit import Driver, Fail

SLEEPY = """
wiggle: 1
name: sleepy
steps:
  - task: first
  - sleep: 1h
"""

FLAKY = """
wiggle: 1
name: flaky
steps:
  - task: first
    retry: {max_attempts: 2, backoff: fixed, initial: 1h}
"""


def _armed_while_waiting(engine: Engine, arm: threading.Event) -> bool:
    """Whether wait_for_timers(60 s) returned early once `arm` was set and a timer armed."""
    engine.wait_for_timers(0)  # forget anything armed before this test
    returned = threading.Event()

    def wait() -> None:
        engine.wait_for_timers(60)
        returned.set()

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    arm.set()
    return returned.wait(30)  # far below the 60 s the waiter would otherwise sleep


def test_a_sleep_wakes_the_ticker(engine: Engine) -> None:
    driver = Driver(engine, {"first": lambda ctx: ctx})
    driver.deploy(SLEEPY)
    engine.start("sleepy", {})
    arm = threading.Event()
    threading.Thread(target=lambda: (arm.wait(), driver.step()), daemon=True).start()
    assert _armed_while_waiting(engine, arm)


def test_a_retry_backoff_wakes_the_ticker(engine: Engine) -> None:
    def fail(ctx: object) -> object:
        raise Fail("try later")

    driver = Driver(engine, {"first": fail})
    driver.deploy(FLAKY)
    engine.start("flaky", {})
    arm = threading.Event()
    threading.Thread(target=lambda: (arm.wait(), driver.step()), daemon=True).start()
    assert _armed_while_waiting(engine, arm)


def test_wake_ends_the_wait(engine: Engine) -> None:
    engine.wait_for_timers(0)
    done = threading.Event()
    threading.Thread(target=lambda: (engine.wait_for_timers(60), done.set()), daemon=True).start()
    engine.wake()
    assert done.wait(30)
