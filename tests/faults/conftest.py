"""The fault suite: real processes over a real PostgreSQL, each scenario proving its fault fired
and ending with a ledger line (see faultkit.py). `bash scripts/faults.sh` runs the full version
(WIGGLE_FAULTS=full) and prints the ledger table; `bash scripts/test.sh` runs the short one.

A scenario's line travels with its test report (as a user property), so the table is printed by
the process that prints the results (tests/conftest.py), also when the scenarios ran in xdist
worker processes."""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from faultkit import Checker, Cluster, Tally

from wiggle._postgres import create_database, drop_database

#: The user property a scenario's tally travels in, as a dict of its fields; tests/conftest.py
#: prints the table of them at the end.
_PROPERTY = "fault-ledger"  # tests/conftest.py: FAULT_LEDGER_PROPERTY


@pytest.fixture
def fault_db(postgres_url: str) -> Iterator[str]:
    url = create_database(postgres_url, prefix="wiggle_f")
    try:
        yield url
    finally:
        drop_database(url)


@pytest.fixture
def cluster(fault_db: str, tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(fault_db, tmp_path)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def checker(fault_db: str) -> Iterator[Checker]:
    c = Checker(fault_db)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def ledger(record_property: Any) -> Any:
    """`ledger(tally)`: assert the suite's invariants on a scenario's line and keep the line for
    the table printed at the end."""

    def record(tally: Tally, *, failed_ok: int = 0) -> Tally:
        record_property(_PROPERTY, dataclasses.asdict(tally))
        print("\n" + tally.line())
        assert tally.lost == 0, tally.line()
        assert tally.stuck == 0, tally.line()
        assert tally.duplicate_events == 0, tally.line()
        assert tally.failed <= failed_ok, tally.line()
        return tally

    return record
