"""tests/databases.py: a recycled PostgreSQL database is as empty as a new one, or not recycled."""

from __future__ import annotations

import psycopg
import pytest
from sqlalchemy import make_url

from tests.databases import Databases
from wiggle._postgres import create_database, drop_database, libpq_url

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
