"""The expression vectors (spec/conformance/expressions/vectors.json) under the server's CEL.

Every SDK runs the same file; each case gives a value the expression must evaluate to, or the
kind of error it must fail with."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from wiggle.expressions import ERROR_KINDS, EvaluationError, compile_expression

# None of these cases is about the time limit, and some take a tenth of a second (conftest.py).
pytestmark = pytest.mark.usefixtures("roomy_time_limit")

VECTORS = Path(__file__).parents[3] / "spec" / "conformance" / "expressions" / "vectors.json"
CASES = json.loads(VECTORS.read_text())["cases"]


def _same(a: Any, b: Any) -> bool:
    """JSON equality that tells 1 from true and 1 from 1.5 (Python's == does not the first)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def test_every_error_kind_named_by_a_vector_is_a_kind_of_the_profile():
    named = {c["error"] for c in CASES if "error" in c}
    assert named <= ERROR_KINDS
    assert len(CASES) == len({c["name"] for c in CASES}), "vector names must be unique"


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_vector(case: dict[str, Any]) -> None:
    expression = compile_expression(case["expr"])
    if "error" in case:
        with pytest.raises(EvaluationError) as caught:
            expression.evaluate(case["ctx"], case.get("instance"))
        assert caught.value.kind == case["error"], caught.value.detail
        assert case["expr"] in str(caught.value)
    else:
        got = expression.evaluate(case["ctx"], case.get("instance"))
        assert _same(got, case["value"]), f"{case['expr']} gave {got!r}"


def test_same_tells_apart_what_json_tells_apart():
    assert not _same(1, True) and not _same(1, 1.5) and not _same([1], [1, 2])
    assert _same({"a": [1, "x", None]}, {"a": [1, "x", None]})
