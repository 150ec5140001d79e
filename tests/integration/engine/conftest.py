"""Fixtures of the engine suite: an Engine on each backend and a test driver factory.

A test that takes `clock` gets an engine reading that virtual clock: its timers, retry
backoffs, lease expiries and leader terms fall due when the test moves the clock (the driver
moves it to the next one when the instance has nothing else to do), never with the wall clock.
Other tests run on the database's clock, where time passes between two calls.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from wiggle.engine import Engine, VirtualClock

# The test kit is a plain module next to this file (importlib import mode does not put test
# directories on sys.path).
sys.path.insert(0, os.path.dirname(__file__))

from engine_testkit import Driver


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
def engine(database_url: str, request: pytest.FixtureRequest) -> Iterator[Engine]:
    given = request.getfixturevalue("clock") if "clock" in request.fixturenames else None
    eng = Engine(database_url, leader_ttl_s=5.0, clock=given)
    try:
        yield eng
    finally:
        eng.close()


@pytest.fixture
def make_driver(engine: Engine) -> Callable[..., Driver]:
    def make(handlers: dict[str, Callable[..., Any]], **kwargs: Any) -> Driver:
        return Driver(engine, handlers, **kwargs)

    return make
