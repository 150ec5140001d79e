"""Fixtures of the engine suite: an Engine on each backend and a test driver factory.

A test that takes `clock` gets an engine reading that virtual clock: its timers, retry
backoffs, lease expiries and leader terms fall due when the test moves the clock (the driver
moves it to the next one when the instance has nothing else to do), never with the wall clock.
Other tests run on the database's clock, where time passes between two calls.

WIGGLE_TEST_DATABASE_PROFILE=distributed runs every PostgreSQL engine of the suite under that
profile (engine/store/profile.py), and WIGGLE_TEST_ISOLATION=serializable makes SERIALIZABLE the
default isolation of each test's PostgreSQL database: the suite's rules, checked again as a
distributed engine would run them (scripts/faults.sh does, tests/faults/test_distributed_suite.py).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.faults.injector import serializable
from wiggle.engine import Engine, VirtualClock, _engine

# The test kit is a plain module next to this file (importlib import mode does not put test
# directories on sys.path).
sys.path.insert(0, os.path.dirname(__file__))

from engine_testkit import Driver

#: Tests that open databases under a profile of their choosing, on purpose.
_CHOOSES_ITS_PROFILE = (
    "tests/integration/engine/test_engine_profile.py",
    "tests/integration/engine/test_engine_storage.py::test_an_engine_creates_the_schema_create_all",
    "tests/integration/engine/test_engine_storage.py::test_the_distributed_profile_creates_the_sch",
)


@pytest.fixture(autouse=True)
def _profile_under_test(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    profile = os.environ.get("WIGGLE_TEST_DATABASE_PROFILE", "")
    if profile and not request.node.nodeid.startswith(_CHOOSES_ITS_PROFILE):
        real = _engine.open_database

        def forced(url: str, given: str = "default", **kw: Any) -> Any:
            return real(url, profile if url.startswith("postgresql") else given, **kw)

        monkeypatch.setattr(_engine, "open_database", forced)
    if os.environ.get("WIGGLE_TEST_ISOLATION", "") == "serializable":
        for name in ("database_url", "postgres_database_url"):
            if name in request.fixturenames:
                url = request.getfixturevalue(name)
                if url.startswith("postgresql"):
                    serializable(url)


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
