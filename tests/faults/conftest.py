"""The fault suite: real processes over a real PostgreSQL, each scenario proving its fault fired
and ending with a ledger line (see faultkit.py). `bash scripts/faults.sh` runs the full version
(WIGGLE_FAULTS=full) and prints the ledger table; `bash scripts/test.sh` runs the short one."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from faultkit import FULL, Checker, Cluster, Tally

from wiggle._postgres import create_database, drop_database

_TALLIES: list[Tally] = []


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
def ledger() -> Any:
    """`ledger(tally)`: assert the suite's invariants on a scenario's line and keep the line for
    the table printed at the end."""

    def record(tally: Tally, *, failed_ok: int = 0) -> Tally:
        _TALLIES.append(tally)
        print("\n" + tally.line())
        assert tally.lost == 0, tally.line()
        assert tally.stuck == 0, tally.line()
        assert tally.duplicate_events == 0, tally.line()
        assert tally.failed <= failed_ok, tally.line()
        return tally

    return record


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _TALLIES:
        return
    write = terminalreporter.write_line
    write("")
    write(f"fault ledger ({'full' if FULL else 'short'} suite)")
    header = (
        "scenario",
        "started",
        "completed",
        "failed",
        "stuck",
        "lost",
        "re-executions",
        "stale refused",
        "dup events",
        "timers",
        "fault",
    )
    rows = [header]
    for t in _TALLIES:
        reexec = " ".join(f"{m}={n}" for m, n in sorted(t.reexec.items())) or "-"
        rows.append(
            (
                t.scenario,
                str(t.started),
                str(t.completed),
                str(t.failed),
                str(t.stuck),
                str(t.lost),
                reexec,
                str(t.stale_refused),
                str(t.duplicate_events),
                str(t.timers_fired),
                t.fault,
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for i, row in enumerate(rows):
        write(" | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))
        if i == 0:
            write("-+-".join("-" * w for w in widths))
