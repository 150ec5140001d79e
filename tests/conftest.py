"""Shared fixtures: a PostgreSQL server for the session and a fresh database per test.

`postgres_url` is WIGGLE_TEST_POSTGRES_URL when set, else a throwaway server started from the
`pgserver` package in a temporary directory (as root, pgserver runs the server as its own
`pgserver` system user, which it creates). Never skipped: a machine without PostgreSQL still
runs the PostgreSQL half of every suite.

`database_url` is parametrised over ["sqlite", "postgres"]: a SQLite file under tmp_path, or a
new PostgreSQL database (dropped afterwards).
"""

from __future__ import annotations

import os
import tempfile
import uuid
import warnings
from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy import make_url


def _libpq(url: str) -> str:
    u = make_url(url)
    return u.set(drivername="postgresql").render_as_string(hide_password=False)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A URL of a PostgreSQL database this session may create databases from."""
    given = os.environ.get("WIGGLE_TEST_POSTGRES_URL")
    if given:
        yield given
        return
    with warnings.catch_warnings():
        # platformdirs warns (at pgserver's import) when XDG_RUNTIME_DIR is unset.
        warnings.simplefilter("ignore")
        import pgserver

        pgdata = tempfile.mkdtemp(prefix="wiggle-pg-")
        server = pgserver.get_server(pgdata, cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server.cleanup()


def fresh_postgres_database(postgres_url: str) -> tuple[str, str]:
    """Create an empty database next to `postgres_url`; returns (url, name)."""
    name = f"wiggle_t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(_libpq(postgres_url), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = make_url(postgres_url).set(database=name).render_as_string(hide_password=False)
    return url, name


def drop_postgres_database(postgres_url: str, name: str) -> None:
    with psycopg.connect(_libpq(postgres_url), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:
    """A fresh, empty database per test, on each backend."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'wiggle.db'}"
        return
    base = request.getfixturevalue("postgres_url")
    url, name = fresh_postgres_database(base)
    try:
        yield url
    finally:
        drop_postgres_database(base, name)


@pytest.fixture
def postgres_database_url(postgres_url: str) -> Iterator[str]:
    """A fresh, empty PostgreSQL database, for behaviour only PostgreSQL has (row locks, NOTIFY)."""
    url, name = fresh_postgres_database(postgres_url)
    try:
        yield url
    finally:
        drop_postgres_database(postgres_url, name)
