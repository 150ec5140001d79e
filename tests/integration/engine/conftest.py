"""Fixtures of the engine suite: an Engine on each backend and a test driver factory."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from wiggle.engine import Engine

# The test kit is a plain module next to this file (importlib import mode does not put test
# directories on sys.path).
sys.path.insert(0, os.path.dirname(__file__))

from engine_testkit import Driver


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    eng = Engine(database_url, leader_ttl_s=5.0)
    try:
        yield eng
    finally:
        eng.close()


@pytest.fixture
def make_driver(engine: Engine) -> Callable[..., Driver]:
    def make(handlers: dict[str, Callable[..., Any]], **kwargs: Any) -> Driver:
        return Driver(engine, handlers, **kwargs)

    return make
