"""Fixtures of the acceptance suite: a `wiggle server` subprocess on each database backend.

Each test module defines `work`, the directory its commands run in (flows, handlers)."""

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
