"""A condition or set node's value as the server computes it (wiggle.expressions._nodes): the
words and the order every SDK must match (docs/expressions.md, "Errors" and "A set, exactly")."""

from __future__ import annotations

from typing import Any

import pytest

from wiggle.expressions import evaluate_node, failure_message
from wiggle.graph import SetValues

INSTANCE = {"id": "i-1", "flow": "f"}


@pytest.mark.parametrize(
    ("ctx", "named"),
    [(None, "null"), ([1], "a list"), ("x", "a string"), (True, "a boolean"), (4.0, "a number")],
)
def test_a_set_on_a_context_that_is_not_an_object_names_it_as_every_sdk_does(
    ctx: Any, named: str
) -> None:
    node = SetValues(id="totals", values={"a": "1"}, next="end")
    error = evaluate_node(node, ctx, INSTANCE).error
    assert error is not None
    assert failure_message(error) == (
        f"type_mismatch: set 'totals' needs an object context; the context is {named}"
    )


def test_a_set_evaluates_its_keys_in_code_point_order_whatever_order_they_were_written_in():
    # Written zeta first: the canonical graph sorts them, and so must a graph compiled just now.
    node = SetValues(id="s", values={"zeta": "ctx.nope", "alpha": "1 / 0", "mid": "2"}, next="end")
    first_failure = evaluate_node(node, {"keep": 1}, INSTANCE).error
    assert first_failure is not None and first_failure.kind == "division_by_zero"
    done = evaluate_node(
        SetValues(id="s", values={"z": "1", "keep": "2", "a": "3"}, next="end"),
        {"keep": 1, "b": 0},
        INSTANCE,
    )
    assert list(done.context) == ["keep", "b", "a", "z"]
    assert done.context == {"keep": 2, "b": 0, "a": 3, "z": 1}
