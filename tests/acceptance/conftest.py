"""Fixtures of the acceptance suite: a `wiggle server` subprocess on each database backend.

Each test module defines `work`, the directory its commands run in (flows, handlers).

An acceptance test drives the CLI (its arguments, output, exit codes) against a server, and
what the server does on each database is the integration suite's, on both. So scripts/test.sh
runs each acceptance test on SQLite, and on PostgreSQL only the ones marked `postgres_too`: the
paths a user takes there first (deploy, start, signal, cancel; two servers on one database; a
schedule firing; prune; bench's figures). `WIGGLE_ACCEPTANCE=full` runs every one on both.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# The kit is a plain module next to this file (importlib import mode does not put test
# directories on sys.path).
sys.path.insert(0, os.path.dirname(__file__))

from clikit import TOKEN, Running, cli_env

_DATABASE_FIXTURES = ("database_url", "durable_database_url")


def pytest_itemcollected(item: pytest.Item) -> None:
    """The PostgreSQL half of a test not marked `postgres_too` is for WIGGLE_ACCEPTANCE=full
    (the module's docstring says why)."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    on_postgres = any(params.get(name) == "postgres" for name in _DATABASE_FIXTURES)
    if on_postgres and item.get_closest_marker("postgres_too") is None:
        item.add_marker(pytest.mark.acceptance_full)


@pytest.fixture
def server(work: Path, database_url: str) -> Iterator[tuple[str, Running]]:
    """A server on an ephemeral loopback port (token required): (address, process)."""
    running = Running(
        ["server", "--address", "127.0.0.1:0", "--database", database_url, "--grace", "2"],
        work,
        cli_env(WIGGLE_AUTH_TOKEN=TOKEN),
    )
    try:
        port = running.wait_for(r"listening on 127\.0\.0\.1:(\d+)").group(1)
        yield f"127.0.0.1:{port}", running
    finally:
        running.stop()
