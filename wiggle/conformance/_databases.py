"""The databases the corpus runs on: a fresh one per execution mode, so modes never share rows.

`sqlite` is a file in a temporary directory; `postgres` is WIGGLE_TEST_POSTGRES_URL, or else a
throwaway server started with the `pgserver` package, with a new database created per mode. Any
other value is a URL used as given (every mode then shares it: instances never collide, since
each run starts its own).
"""

from __future__ import annotations

import importlib
import os
import shutil
import tempfile
import uuid
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["database_label", "fresh_databases"]


def database_label(spec: str) -> str:
    if spec in ("sqlite", "postgres"):
        return spec
    from sqlalchemy import make_url

    return make_url(spec).get_backend_name()


@contextmanager
def _postgres_base() -> Iterator[str]:
    url = os.environ.get("WIGGLE_TEST_POSTGRES_URL")
    if url:
        yield url
        return
    with warnings.catch_warnings():
        # platformdirs warns about an unset XDG_RUNTIME_DIR on import; harmless here.
        warnings.simplefilter("ignore")
        pgserver: Any = importlib.import_module("pgserver")

    data = tempfile.mkdtemp(prefix="wiggle-conformance-pg-")
    server: Any = pgserver.get_server(data, cleanup_mode="stop")
    try:
        yield str(server.get_uri())
    finally:
        server.cleanup()
        shutil.rmtree(data, ignore_errors=True)


@contextmanager
def fresh_databases(spec: str) -> Iterator[Callable[[], str]]:
    """Yield a function returning a new, empty database URL on each call."""
    if spec == "sqlite":
        tmp = tempfile.mkdtemp(prefix="wiggle-conformance-")
        try:
            yield lambda: f"sqlite:///{Path(tmp) / uuid.uuid4().hex}.db"
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return
    if spec != "postgres":
        yield lambda: spec
        return
    from sqlalchemy import create_engine, make_url, text

    with _postgres_base() as base:
        url = make_url(base)
        if url.drivername in ("postgresql", "postgres"):
            url = url.set(drivername="postgresql+psycopg")
        admin = create_engine(url, isolation_level="AUTOCOMMIT")
        created: list[str] = []

        def new() -> str:
            name = f"wiggle_conformance_{uuid.uuid4().hex[:12]}"
            with admin.connect() as conn:
                conn.execute(text(f'CREATE DATABASE "{name}"'))
            created.append(name)
            return url.set(database=name).render_as_string(hide_password=False)

        try:
            yield new
        finally:
            with admin.connect() as conn:
                for name in created:
                    conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            admin.dispose()
