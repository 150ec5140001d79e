"""The shape of PostgreSQL's one write statement: only the work a transition has."""

from __future__ import annotations

import orjson

from wiggle.engine.store.queries import pg_write


def _set(name: str, number: float) -> dict[str, object]:
    return {"instance_id": "i1", "name": name, "text_value": None, "num_value": number}


def _gone(name: str) -> dict[str, object]:
    return {"instance_id": "i1", "name": name}


def test_a_search_value_that_is_set_runs_no_delete():
    """A value that changed (the case of every step whose key moves) is one upsert; the
    DELETE of values that became absent is not in the statement."""
    got = pg_write([], [], [], search_put=[_set("n", 3.0)])
    assert got is not None
    sql, params = got
    assert "DELETE" not in sql and "INSERT INTO wiggle_search" in sql
    assert orjson.loads(params["sv"]) == [
        {"instance_id": "i1", "name": "n", "text_value": None, "num_value": 3.0}
    ]
    assert "sd" not in params


def test_a_search_value_that_became_absent_is_deleted_and_not_upserted():
    got = pg_write([], [], [], search_put=[_set("m", 1.0)], search_gone=[_gone("n")])
    assert got is not None
    sql, params = got
    assert "DELETE FROM wiggle_search" in sql and "INSERT INTO wiggle_search" in sql
    assert orjson.loads(params["sd"]) == [{"instance_id": "i1", "name": "n"}]
    assert [r["name"] for r in orjson.loads(params["sv"])] == ["m"]
