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
new one made, as before. A backend ends a moment after it is terminated or its client closes
it, longer on a loaded machine: the reset waits for those it terminates, and a take for those
of the connections the reset itself closed, before counting who is connected.

Most PostgreSQL tests open an engine on their database before they begin (the `engine` and
`stack` fixtures), and that engine's first act, creating the schema's 45 tables and indexes, cost
about 90 ms of the server's CPU, a tenth of a second per test again in dropping them. Those
tests ask for a *primed* database instead: one that holds exactly the schema an engine of this
checkout creates (compared, catalog entry by catalog entry, with that schema made and rolled
back in a transaction) and the rows a new schema starts with, as the engine would have left it
a moment after creating it. Its rows are emptied, its sequences restarted and the seed rows
written again (`seed_schema`, the engine's own) when it is taken, after the same checks as
above, which costs about 3 ms. A database whose schema differs in anything (a test that
migrated, altered or added to it) is reset to empty as before. Tests of what an engine does on
an empty database still get an empty one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from sqlalchemy import Connection, create_engine, make_url
from sqlalchemy.pool import NullPool

from wiggle._postgres import create_database, drop_database, libpq_url
from wiggle.engine.store.schema import ensure_schema, seed_schema

__all__ = ["SCHEMA_HASH", "Databases"]

#: Schemas every database has, which a reset leaves alone.
_BUILT_IN = ("public", "information_schema")

#: `public` as CREATE DATABASE makes it (PostgreSQL 15 and later; the throwaway server is 16).
_RESET_PUBLIC = """
DROP SCHEMA public CASCADE;
CREATE SCHEMA public AUTHORIZATION pg_database_owner;
GRANT USAGE ON SCHEMA public TO PUBLIC;
COMMENT ON SCHEMA public IS 'standard public schema';
"""

#: Everything schema %(schema)s holds, one line per catalog entry, hashed: relations, columns
#: (type, nullability, default), indexes, constraints, functions, types and triggers, each
#: without the schema's name. Two schemas with the same hash are the same. Run with that schema
#: first on the search path (as `public` is by default), so names in defaults are unqualified.
SCHEMA_HASH = """
SELECT md5(coalesce(string_agg(entry, E'\\n' ORDER BY entry), '')) FROM (
    SELECT 'relation ' || c.relkind::text || ' ' || c.relname AS entry
      FROM pg_class c WHERE c.relnamespace = %(schema)s::text::regnamespace
    UNION ALL
    SELECT 'column ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
           || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
           || coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), '')
      FROM pg_attribute a
      JOIN pg_class c ON c.oid = a.attrelid AND c.relnamespace = %(schema)s::text::regnamespace
      LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
     WHERE a.attnum > 0 AND NOT a.attisdropped
    UNION ALL
    SELECT 'index ' || replace(indexdef, ' ON ' || schemaname || '.', ' ON ')
      FROM pg_indexes WHERE schemaname = %(schema)s::text
    UNION ALL
    SELECT 'constraint ' || conrelid::regclass::text || ' ' || conname || ' '
           || pg_get_constraintdef(oid)
      FROM pg_constraint WHERE connamespace = %(schema)s::text::regnamespace
    UNION ALL
    SELECT 'function ' || oid::regprocedure::text
      FROM pg_proc WHERE pronamespace = %(schema)s::text::regnamespace
    UNION ALL
    SELECT 'type ' || typname FROM pg_type WHERE typnamespace = %(schema)s::text::regnamespace
    UNION ALL
    SELECT 'trigger ' || t.tgname FROM pg_trigger t
      JOIN pg_class c ON c.oid = t.tgrelid AND c.relnamespace = %(schema)s::text::regnamespace
) entries
"""

#: Ends the sessions on database %(name)s other than ours, all of them or those of %(pids)s,
#: waiting up to %(ms)s for each to end (PostgreSQL 14 and later: without a timeout it only
#: signals, and a backend still ending when the database was next taken made that take drop it).
#: A backend we closed ourselves is ending already: for it this is only the wait.
_END_SESSIONS = (
    "SELECT count(pg_terminate_backend(pid, %(ms)s)) FROM pg_stat_activity "
    "WHERE datname = %(name)s AND pid <> pg_backend_pid() "
    "AND (%(pids)s::int[] IS NULL OR pid = ANY(%(pids)s::int[]))"
)
_ENDED_WITHIN_MS = 10_000

#: How many client sessions other than ours are connected to database %(name)s. Not the
#: server's own workers: an autovacuum worker shows there too, and comes and goes as it pleases.
_OTHERS = (
    "SELECT count(*) FROM pg_stat_activity WHERE datname = %(name)s "
    "AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
)

#: The server's clock in milliseconds, as the engine reads it to date a new schema.
_NOW_MS = "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint"


def _sessions_left(
    run: Callable[[str, dict[str, Any]], int], name: str | None, ours: list[int]
) -> int:
    """The client sessions connected to database `name`, once the backends of the connections
    we closed on it (`ours`: a backend ends a moment after its client closes it, longer on a
    loaded machine) have ended; `run` runs a statement and returns its one value."""
    if ours:
        run(_END_SESSIONS, {"name": name, "pids": ours, "ms": _ENDED_WITHIN_MS})
        run("SELECT 0 FROM pg_stat_clear_snapshot()", {})  # else one snapshot per transaction
    return run(_OTHERS, {"name": name})


class Databases:
    """The recycled databases of one PostgreSQL server, for the tests of one process."""

    def __init__(self, server_url: str, prefix: str = "wiggle_t") -> None:
        self._server = server_url
        self._prefix = prefix
        self._spare: list[str] = []  # `public` empty
        self._primed: list[str] = []  # `public` holds the engine's schema (_wiggle_shape)
        self._shape: str | None = None
        #: Database -> the backends of the connections we closed on it since its reset.
        self._closed: dict[str, list[int]] = {}
        self.created = 0
        self.recycled = 0
        self.primed = 0
        #: Why each database that was not recycled was dropped ("NAME: why").
        self.refusals: list[str] = []

    @contextmanager
    def fresh(self, *, primed: bool = False) -> Iterator[str]:
        """An empty database for the block, recycled afterwards. `primed`: one that holds the
        schema a new engine creates, with nothing in it yet, when one is spare (the module's
        docstring); otherwise an empty one, as without."""
        url = (self._take_primed() if primed else None) or self._take()
        try:
            yield url
        finally:
            self._give_back(url)

    def close(self) -> None:
        """Drop the spare databases (a server given by WIGGLE_TEST_POSTGRES_URL outlives us)."""
        while self._spare or self._primed:
            drop_database((self._spare or self._primed).pop())

    def _take(self) -> str:
        # Emptying a primed one costs half of what making a new database does.
        url = self._reuse(self._spare, self._pristine) or self._reuse(
            self._primed, self._empty_public
        )
        if url is not None:
            self.recycled += 1
            return url
        self.created += 1
        return create_database(self._server, prefix=self._prefix)

    def _take_primed(self) -> str | None:
        url = self._reuse(self._primed, self._empty_rows)
        if url is not None:
            self.primed += 1
        return url

    def _reuse(self, spares: list[str], ready: Callable[[str], str]) -> str | None:
        """The last of `spares` that `ready` readies (it returns why not, or ""), dropping
        each one it refuses."""
        while spares:
            url = spares.pop()
            try:
                why = ready(url)
            except psycopg.Error as exc:
                why = _failed(exc)
            if not why:
                return url
            self._drop(url, why)
        return None

    def _drop(self, url: str, why: str) -> None:
        name = str(make_url(url).database)
        self.refusals.append(f"{name}: {why}")
        self._closed.pop(name, None)
        drop_database(url)

    def _give_back(self, url: str) -> None:
        try:
            kept = self._reset(url)
        except psycopg.Error as exc:
            kept = _failed(exc)
        if isinstance(kept, str):
            self._drop(url, kept)
        else:
            kept.append(url)

    def _reset(self, url: str) -> list[str] | str:
        """Disconnect everyone and reset the database's settings; then keep it primed when it
        holds exactly the engine's schema, else empty `public`. Returns the list it belongs on,
        or why it cannot be recycled."""
        name = str(make_url(url).database)
        closed = self._closed[name] = []
        with psycopg.connect(libpq_url(url), autocommit=True) as conn:
            closed.append(conn.info.backend_pid)
            conn.execute(_END_SESSIONS, {"name": name, "pids": None, "ms": _ENDED_WITHIN_MS})
            own = conn.execute(
                "SELECT count(*) FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%%' "
                "AND nspname <> ALL(%s)",
                (list(_BUILT_IN),),
            ).fetchone()
            if own is None or own[0] != 0:
                return "it has a schema of its own"
            conn.execute(f'ALTER DATABASE "{name}" RESET ALL')
            found = conn.execute("SELECT to_regclass('public.wiggle_schema_version')").fetchone()
            if found is not None and found[0] is not None:
                shape = conn.execute(SCHEMA_HASH, {"schema": "public"}).fetchone()
                if shape is not None and shape[0] == self._wiggle_shape(url, closed):
                    return self._primed
            conn.execute(_RESET_PUBLIC)
        return self._spare

    def _wiggle_shape(self, url: str, closed: list[int]) -> str:
        """The hash of the schema an engine of this checkout creates: made in a schema of its
        own on `url`'s database, in a transaction that is rolled back (its backend noted in
        `closed`)."""
        if self._shape is None:
            engine = create_engine(url, poolclass=NullPool)
            try:
                with engine.connect() as conn, conn.begin() as tx:
                    closed.append(_backend_pid(conn))
                    conn.exec_driver_sql("CREATE SCHEMA wiggle_shape")
                    conn.exec_driver_sql("SET LOCAL search_path TO wiggle_shape")
                    ensure_schema(conn, 0)
                    hashed = conn.exec_driver_sql(SCHEMA_HASH, {"schema": "wiggle_shape"})
                    self._shape = str(hashed.scalar_one())
                    tx.rollback()
            finally:
                engine.dispose()
        return self._shape

    def _empty_rows(self, url: str) -> str:
        """Empty every table of a primed database, restart its sequences and write the rows a
        new schema holds, unless something is connected to it (a process a test left behind)."""
        name = make_url(url).database
        engine = create_engine(url, poolclass=NullPool)
        try:
            with engine.begin() as conn:
                others = _sessions_left(
                    lambda q, p: _one(conn.exec_driver_sql(q, p).first()), name, self._ours(name)
                )
                if others:
                    return f"{others} sessions connected"
                tables = conn.exec_driver_sql(
                    "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
                ).scalars()
                for table in list(tables):
                    conn.exec_driver_sql(f'DELETE FROM public."{table}"')
                sequences = conn.exec_driver_sql(
                    "SELECT sequencename FROM pg_sequences WHERE schemaname = 'public'"
                ).scalars()
                for sequence in list(sequences):
                    conn.exec_driver_sql(f'ALTER SEQUENCE public."{sequence}" RESTART')
                seed_schema(conn, int(conn.exec_driver_sql(_NOW_MS).scalar_one()))
        finally:
            engine.dispose()
        return ""

    def _ours(self, name: str | None) -> list[int]:
        """The backends of the connections we closed on database `name` since its reset."""
        return self._closed.pop(str(name), [])

    def _empty_public(self, url: str) -> str:
        """Drop and make again `public` of a primed database, unless something is connected."""
        name = make_url(url).database
        with psycopg.connect(libpq_url(url), autocommit=True) as conn:
            others = _sessions_left(
                lambda q, p: _one(conn.execute(q, p).fetchone()), name, self._ours(name)
            )
            if others:
                return f"{others} sessions connected"
            conn.execute(_RESET_PUBLIC)
        return ""

    def _pristine(self, url: str) -> str:
        """Why the database is not as its reset left it, or ""."""
        name = make_url(url).database
        with psycopg.connect(libpq_url(url), autocommit=True) as conn:
            others = _sessions_left(
                lambda q, p: _one(conn.execute(q, p).fetchone()), name, self._ours(name)
            )
            relations = _one(
                conn.execute(
                    "SELECT count(*) FROM pg_class c JOIN pg_namespace n "
                    "ON n.oid = c.relnamespace WHERE n.nspname = 'public'"
                ).fetchone()
            )
        if others:
            return f"{others} sessions connected"
        return f"{relations} relations in public" if relations else ""


def _backend_pid(conn: Connection) -> int:
    """The server process of a SQLAlchemy connection over psycopg."""
    driver: Any = conn.connection.driver_connection
    return int(driver.info.backend_pid)


def _failed(exc: psycopg.Error) -> str:
    return f"{type(exc).__name__}: {exc}"


def _one(row: Any) -> int:
    """The one value of a row (None, the row of a statement that returns nothing: 0)."""
    return 0 if row is None or row[0] is None else int(row[0])
