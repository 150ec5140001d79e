"""Fresh, empty PostgreSQL databases for tests, recycled instead of created and dropped each time.

A test that asks for a PostgreSQL database gets one with nothing in it, as if just created. Making
one is the costliest thing most PostgreSQL tests do: CREATE DATABASE copies the template through
the WAL (about 0.2 s of the server's CPU here, fsync off or not) and DROP DATABASE removes it again.
On this 2-core machine the suite is bound by CPU, and some 550 of those a run were a third of
PostgreSQL's CPU. So a database a test is done with is emptied and kept for the next test of the
same process: its connections are ended (as DROP DATABASE ... WITH (FORCE) ends them), its
`public` schema is dropped with everything in it and made again as a new database has it, and its
database-level settings are reset. That costs about a twentieth of a create and drop.

A database is recycled only when `public` is the only schema of its own (anything else a test made
would outlive the reset), and taken again only when nothing is connected to it and `public` is
still empty (a process a test left behind could have reconnected); otherwise it is dropped and a
new one made, as before.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from sqlalchemy import make_url

from wiggle._postgres import create_database, drop_database, libpq_url

__all__ = ["Databases"]

#: Schemas every database has, which a reset leaves alone.
_BUILT_IN = ("public", "information_schema")

#: `public` as CREATE DATABASE makes it (PostgreSQL 15 and later; the throwaway server is 16).
_RESET_PUBLIC = """
DROP SCHEMA public CASCADE;
CREATE SCHEMA public AUTHORIZATION pg_database_owner;
GRANT USAGE ON SCHEMA public TO PUBLIC;
COMMENT ON SCHEMA public IS 'standard public schema';
"""


class Databases:
    """The recycled databases of one PostgreSQL server, for the tests of one process."""

    def __init__(self, server_url: str, prefix: str = "wiggle_t") -> None:
        self._server = server_url
        self._prefix = prefix
        self._spare: list[str] = []
        self.created = 0
        self.recycled = 0

    @contextmanager
    def fresh(self) -> Iterator[str]:
        """An empty database for the block, recycled afterwards."""
        url = self._take()
        try:
            yield url
        finally:
            self._give_back(url)

    def close(self) -> None:
        """Drop the spare databases (a server given by WIGGLE_TEST_POSTGRES_URL outlives us)."""
        while self._spare:
            drop_database(self._spare.pop())

    def _take(self) -> str:
        while self._spare:
            url = self._spare.pop()
            if self._pristine(url):
                self.recycled += 1
                return url
            drop_database(url)
        self.created += 1
        return create_database(self._server, prefix=self._prefix)

    def _give_back(self, url: str) -> None:
        try:
            reset = self._reset(url)
        except psycopg.Error:
            reset = False
        if reset:
            self._spare.append(url)
        else:
            drop_database(url)

    def _reset(self, url: str) -> bool:
        name = make_url(url).database
        with psycopg.connect(libpq_url(url), autocommit=True) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            )
            own = conn.execute(
                "SELECT count(*) FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%%' "
                "AND nspname <> ALL(%s)",
                (list(_BUILT_IN),),
            ).fetchone()
            if own is None or own[0] != 0:
                return False
            conn.execute(f'ALTER DATABASE "{name}" RESET ALL')
            conn.execute(_RESET_PUBLIC)
        return True

    def _pristine(self, url: str) -> bool:
        name = make_url(url).database
        with psycopg.connect(libpq_url(url), autocommit=True) as conn:
            row = conn.execute(
                "SELECT (SELECT count(*) FROM pg_stat_activity "
                "        WHERE datname = %s AND pid <> pg_backend_pid()), "
                "       (SELECT count(*) FROM pg_class c JOIN pg_namespace n "
                "        ON n.oid = c.relnamespace WHERE n.nspname = 'public')",
                (name,),
            ).fetchone()
        return row == (0, 0)
