"""tests/databases.py: a recycled PostgreSQL database is as empty as a new one, or not recycled;
a primed one is as a new engine finds the database it just created."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from sqlalchemy import make_url

from tests.databases import SCHEMA_HASH, Databases
from tests.waiting import wait_until
from wiggle._postgres import create_database, drop_database, libpq_url, postgres_server
from wiggle.compiler import load_flow
from wiggle.engine import Engine

pytestmark = pytest.mark.postgres

_SHAPE = """
SELECT
  (SELECT array_agg(nspname ORDER BY nspname) FROM pg_namespace),
  (SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'public'),
  (SELECT nspacl::text FROM pg_namespace WHERE nspname = 'public'),
  (SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname = 'public'),
  (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'public'),
  (SELECT count(*) FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase
     WHERE d.datname = current_database())
"""


def _shape(url: str) -> tuple[object, ...]:
    with psycopg.connect(libpq_url(url)) as conn:
        row = conn.execute(_SHAPE).fetchone()
    assert row is not None
    return tuple(row)


def _use(url: str, *statements: str) -> None:
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


@pytest.fixture
def databases(postgres_url: str):
    made = Databases(postgres_url, prefix="wiggle_recycle")
    yield made
    made.close()


def test_a_recycled_database_is_shaped_as_a_new_one(databases: Databases, postgres_url: str):
    new = create_database(postgres_url, prefix="wiggle_recycle")
    try:
        as_created = _shape(new)
    finally:
        drop_database(new)
    with databases.fresh() as url:
        name = make_url(url).database
        _use(
            url,
            "CREATE TABLE t (id serial PRIMARY KEY, v text)",
            "INSERT INTO t (v) VALUES ('x')",
            "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1'",
            f'ALTER DATABASE "{name}" SET default_transaction_isolation = serializable',
        )
        assert _shape(url) != as_created
    with databases.fresh() as again:
        assert again == url  # taken again, not made
        assert _shape(again) == as_created
    assert (databases.created, databases.recycled) == (1, 1)


def test_a_database_with_a_schema_of_its_own_is_dropped_not_recycled(databases: Databases):
    with databases.fresh() as url:
        _use(url, "CREATE SCHEMA mine", "CREATE TABLE mine.t (id int)")
    with databases.fresh() as other:
        assert other != url
    assert (databases.created, databases.recycled) == (2, 0)


def test_a_database_someone_reconnected_to_is_not_taken_again(databases: Databases):
    with databases.fresh() as url:
        pass
    # A process a test left behind connects again after the reset.
    lingering = psycopg.connect(libpq_url(url), autocommit=True)
    try:
        with databases.fresh() as other:
            assert other != url
    finally:
        lingering.close()  # ended already: its database was dropped
    assert databases.created == 2 and databases.recycled == 0


def test_connections_left_open_by_a_test_are_ended(databases: Databases):
    with databases.fresh() as url:
        left = psycopg.connect(libpq_url(url))
        left.execute("CREATE TABLE t (id int)")
        left.commit()
    with pytest.raises(psycopg.OperationalError):
        left.execute("SELECT 1")
    left.close()
    with databases.fresh() as again:
        assert again == url
        assert _shape(again)[4] == 0


@pytest.fixture(scope="module")
def local_server() -> Iterator[str]:
    """A throwaway server of this module's own, whatever WIGGLE_TEST_POSTGRES_URL names: the
    tests below stop and continue its backends, which must be processes of this machine."""
    with postgres_server(own=True) as url:
        yield url


@pytest.fixture
def local_databases(local_server: str) -> Iterator[Databases]:
    made = Databases(local_server, prefix="wiggle_recycle")
    yield made
    made.close()


#: Sessions of the server waiting for another backend to end (pg_terminate_backend with a
#: timeout, PostgreSQL 14 and later).
_WAITING_FOR_AN_END = (
    "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'BackendTermination'"
)


def _let_go_once_waited_for(server: str, pids: list[int]) -> threading.Thread:
    """Continue the stopped backends `pids` once a session of `server` waits for a backend to
    end (the reset's or the take's pg_terminate_backend with a timeout), or after 30 s when
    none does (code that does not wait then finds them still there)."""

    def waiting() -> bool:
        with psycopg.connect(libpq_url(server), autocommit=True) as conn:
            row = conn.execute(_WAITING_FOR_AN_END).fetchone()
        return row is not None and row[0] > 0

    def let_go() -> None:
        try:
            wait_until(waiting, 30.0, "a session waiting for a backend to end")
        except AssertionError:
            pass  # nobody waits: the take finds the stopped backends, which is what is tested
        finally:
            for pid in pids:
                os.kill(pid, signal.SIGCONT)

    resume = threading.Thread(target=let_go, name="let-go")
    resume.start()
    return resume


def test_a_connection_slow_to_end_is_waited_for_before_the_database_is_taken_again(
    local_databases: Databases, local_server: str
):
    """pg_terminate_backend only signals: a backend ends a moment later, longer on a loaded
    machine, and one still listed made the next take drop the database and make a new one
    (a clean-clone run with one core kept busy failed the test above so). A backend held
    stopped until the reset waits for it to end (or 30 s pass) plays that moment out."""
    with local_databases.fresh() as url:
        left = psycopg.connect(libpq_url(url))
        os.kill(left.info.backend_pid, signal.SIGSTOP)
        resume = _let_go_once_waited_for(local_server, [left.info.backend_pid])
    try:
        with local_databases.fresh() as again:
            assert again == url, local_databases.refusals
    finally:
        resume.join()
        left.close()
    assert (local_databases.created, local_databases.recycled) == (1, 1)


@pytest.mark.parametrize("primed", [False, True], ids=["empty", "primed"])
def test_the_backends_of_the_resets_own_connections_are_waited_for_when_the_database_is_taken(
    local_databases: Databases, local_server: str, monkeypatch: pytest.MonkeyPatch, primed: bool
):
    """A backend ends a moment after its client closes it, longer on a loaded machine, and the
    reset's own still listed made the take drop the database (a clean-clone run with one core
    kept busy failed the primed test below so). Every connection the reset closes has its
    backend held stopped as it closes, and let go once the take waits for it to end."""
    stopped: list[int] = []
    close = psycopg.Connection.close

    def close_slowly(conn: psycopg.Connection[Any]) -> None:
        if not conn.closed:
            stopped.append(conn.info.backend_pid)
            os.kill(conn.info.backend_pid, signal.SIGSTOP)
        close(conn)

    with local_databases.fresh(primed=primed) as url:
        if primed:
            Engine(url).close()
        monkeypatch.setattr(psycopg.Connection, "close", close_slowly)
    monkeypatch.undo()
    assert stopped  # the reset closed a connection
    resume = _let_go_once_waited_for(local_server, stopped)
    try:
        with local_databases.fresh(primed=primed) as again:
            assert again == url, local_databases.refusals
    finally:
        resume.join()
    assert local_databases.primed == (1 if primed else 0), local_databases.refusals


# -- primed databases: the schema a new engine creates, with nothing in it --------------------


def _content(url: str) -> tuple[object, ...]:
    """Every table's row count, the seed rows, and each sequence's state."""
    with psycopg.connect(libpq_url(url)) as conn:
        tables = [
            name
            for (name,) in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"
            )
        ]
        counts = {t: conn.execute(f'SELECT count(*) FROM "{t}"').fetchone() for t in tables}
        version = conn.execute("SELECT version FROM wiggle_schema_version").fetchall()
        leader = conn.execute(
            "SELECT name, holder, term, expires_at_ms FROM wiggle_leader"
        ).fetchall()
        sequences = conn.execute(
            "SELECT sequencename, last_value FROM pg_sequences WHERE schemaname = 'public' "
            "ORDER BY sequencename"
        ).fetchall()
    return counts, version, leader, sequences


def _as_a_new_engine_creates_it(postgres_url: str) -> tuple[tuple[object, ...], str]:
    """The content and the shape hash of a new database an engine opened, before any use."""
    new = create_database(postgres_url, prefix="wiggle_recycle")
    try:
        Engine(new).close()
        with psycopg.connect(libpq_url(new)) as conn:
            shape = conn.execute(SCHEMA_HASH, {"schema": "public"}).fetchone()
        assert shape is not None
        return _content(new), shape[0]
    finally:
        drop_database(new)


def _use_an_engine(url: str) -> None:
    """Run a flow to its end and leave rows in most tables (instances, tokens, events, the
    definition, the node and the leader)."""
    engine = Engine(url)
    try:
        engine.register(load_flow(FLOW.encode()))
        started = engine.start("primed", {"n": 1})
        engine.signal(started.instance_id, "go", {"ok": True})
        engine.tick()
    finally:
        engine.close()


FLOW = """\
wiggle: 1
name: primed
steps:
  - {await: go, id: wait}
"""


def test_a_database_an_engine_used_is_handed_out_again_as_a_new_engine_finds_it(
    databases: Databases, postgres_url: str
):
    new_content, new_shape = _as_a_new_engine_creates_it(postgres_url)
    with databases.fresh(primed=True) as url:
        assert _shape(url)[4] == 0  # none primed yet: an empty one
        _use_an_engine(url)
        assert _content(url) != new_content
    with databases.fresh(primed=True) as again:
        assert again == url and databases.primed == 1, databases.refusals
        assert _content(again) == new_content
        with psycopg.connect(libpq_url(again)) as conn:
            shape = conn.execute(SCHEMA_HASH, {"schema": "public"}).fetchone()
        assert shape is not None and shape[0] == new_shape
        _use_an_engine(again)  # and an engine works on it as on a new one


def test_a_database_whose_schema_a_test_changed_is_handed_out_empty(databases: Databases):
    with databases.fresh(primed=True) as url:
        Engine(url).close()
        _use(url, "ALTER TABLE wiggle_instances ADD COLUMN extra int")
    with databases.fresh(primed=True) as again:
        assert again == url and databases.primed == 0, databases.refusals
        assert _shape(again)[4] == 0


def test_an_empty_database_is_asked_for_while_only_primed_ones_are_spare(databases: Databases):
    with databases.fresh(primed=True) as url:
        Engine(url).close()
    with databases.fresh() as again:
        assert again == url, databases.refusals  # emptied, not made
        assert _shape(again)[4] == 0
