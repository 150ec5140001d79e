"""wiggle.jsonvalue: JSON equality as Wiggle keeps values, and their short rendering."""

from __future__ import annotations

from wiggle.jsonvalue import json_equal, show


def test_json_equal_tells_an_integer_from_a_fraction_and_true_from_one() -> None:
    assert not json_equal(4, 4.0)
    assert not json_equal(True, 1)
    assert json_equal({"a": [1, {"b": None}]}, {"a": [1, {"b": None}]})
    assert not json_equal({"a": [1]}, {"a": [1.0]})


def test_show_sorts_keys_and_cuts_at_the_limit() -> None:
    assert show({"b": 1, "a": [True, None]}) == '{"a":[true,null],"b":1}'
    assert show("x" * 10, limit=5) == '"xxxx...'
    assert len(show(list(range(1000)))) == 403
