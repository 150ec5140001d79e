"""Shared fixtures: a PostgreSQL server for the session and a fresh database per test.

`postgres_url` is WIGGLE_TEST_POSTGRES_URL when set, else a throwaway server started from the
`pgserver` package in a temporary directory (as root, pgserver runs the server as its own
`pgserver` system user, which it creates). Never skipped: a machine without PostgreSQL still
runs the PostgreSQL half of every suite.

`database_url` is parametrised over ["sqlite", "postgres"]: a SQLite file under tmp_path, or a
new PostgreSQL database (dropped afterwards).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from wiggle._postgres import create_database, drop_database, postgres_server


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A URL of a PostgreSQL database this session may create databases from."""
    with postgres_server() as url:
        yield url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:
    """A fresh, empty database per test, on each backend."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'wiggle.db'}"
        return
    url = create_database(request.getfixturevalue("postgres_url"), prefix="wiggle_t")
    try:
        yield url
    finally:
        drop_database(url)


@pytest.fixture
def postgres_database_url(postgres_url: str) -> Iterator[str]:
    """A fresh, empty PostgreSQL database, for behaviour only PostgreSQL has (row locks, NOTIFY)."""
    url = create_database(postgres_url, prefix="wiggle_t")
    try:
        yield url
    finally:
        drop_database(url)
