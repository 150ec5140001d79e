"""Throwaway PostgreSQL for tests, the conformance runner and benchmarks.

`postgres_server()` yields the URL of WIGGLE_TEST_POSTGRES_URL when set, else of a server started
from the `pgserver` package (which ships the PostgreSQL binaries; as root it runs the server as
its own `pgserver` system user) in a temporary directory, stopped and removed afterwards.
`create_database` / `drop_database` give each test, mode or benchmark run an empty database of
its own next to that URL.
"""

from __future__ import annotations

import importlib
import os
import shutil
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["create_database", "drop_database", "libpq_url", "postgres_server", "sqlalchemy_url"]


def sqlalchemy_url(url: str) -> str:
    """`url` with the psycopg 3 driver named, as SQLAlchemy needs it."""
    from sqlalchemy import make_url

    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


def libpq_url(url: str) -> str:
    """`url` as the connection string psycopg.connect takes: the keywords SQLAlchemy itself
    would pass, so a multi-host URL (`?host=a:5432&host=b:5432&target_session_attrs=...`)
    keeps every host."""
    from psycopg.conninfo import make_conninfo
    from sqlalchemy import make_url

    parsed = make_url(sqlalchemy_url(url))
    _args, params = parsed.get_dialect()().create_connect_args(parsed)
    return make_conninfo(**params)


@contextmanager
def postgres_server(*, own: bool = False) -> Iterator[str]:
    """A PostgreSQL URL this caller may create databases from, for the duration of the block:
    WIGGLE_TEST_POSTGRES_URL's server when set, else a throwaway one. `own`: a throwaway one in
    any case (a test that signals the server's processes needs them on this machine)."""
    given = os.environ.get("WIGGLE_TEST_POSTGRES_URL")
    if given and not own:
        yield sqlalchemy_url(given)
        return
    with warnings.catch_warnings():
        # platformdirs warns on pgserver's import when XDG_RUNTIME_DIR is unset; harmless.
        warnings.simplefilter("ignore")
        pgserver: Any = importlib.import_module("pgserver")

        data = tempfile.mkdtemp(prefix="wiggle-pg-")
        server: Any = pgserver.get_server(data, cleanup_mode="stop")
    try:
        yield sqlalchemy_url(str(server.get_uri()))
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server.cleanup()
        shutil.rmtree(data, ignore_errors=True)


def create_database(base_url: str, prefix: str = "wiggle") -> str:
    """Create an empty database on the server of `base_url`; returns its SQLAlchemy URL."""
    import psycopg
    from sqlalchemy import make_url

    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(libpq_url(base_url), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return sqlalchemy_url(make_url(base_url).set(database=name).render_as_string(False))


def drop_database(database_url: str) -> None:
    """Drop the database of `database_url`, disconnecting whoever is still connected."""
    import psycopg
    from sqlalchemy import make_url

    parsed = make_url(database_url)
    admin = libpq_url(parsed.set(database="postgres").render_as_string(False))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{parsed.database}" WITH (FORCE)')


@contextmanager
def given_or_throwaway(url: str | None, prefix: str = "wiggle_bench") -> Iterator[str]:
    """`url` as it is, or a fresh database on a throwaway server (postgres_server), dropped
    afterwards: what a benchmark script runs on without `--database`."""
    if url is not None:
        yield url
        return
    with postgres_server() as server:
        made = create_database(server, prefix=prefix)
        try:
            yield made
        finally:
            drop_database(made)
