"""The databases the corpus runs on: a fresh one per execution mode, so modes never share rows.

`sqlite` is a file in a temporary directory; `postgres` is WIGGLE_TEST_POSTGRES_URL, or else a
throwaway server started with the `pgserver` package, with a new database created per mode. Any
other value is a URL used as given (every mode then shares it: instances never collide, since
each run starts its own).
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from wiggle._postgres import create_database, drop_database, postgres_server

__all__ = ["database_label", "fresh_databases"]


def database_label(spec: str) -> str:
    if spec in ("sqlite", "postgres"):
        return spec
    from sqlalchemy import make_url

    return make_url(spec).get_backend_name()


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
    with postgres_server() as base:
        created: list[str] = []

        def new() -> str:
            created.append(create_database(base, prefix="wiggle_conformance"))
            return created[-1]

        try:
            yield new
        finally:
            for url in created:
                drop_database(url)
