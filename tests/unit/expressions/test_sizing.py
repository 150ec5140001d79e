"""The size budget (docs/expressions.md, "Limits"): what an evaluation makes is counted, and an
evaluation that makes too much fails its node instead of filling the server's memory.

The hostile cases (spec/conformance/expressions/sizes.json) would make hundreds of megabytes or
more if nothing stopped them; the budget stops each after a few megabytes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from wiggle.expressions import EvaluationError, ExpressionInvalid, compile_expression
from wiggle.expressions._cel import OVER_SIZE_BUDGET
from wiggle.expressions._sizing import SIZE_BUDGET
from wiggle.expressions._syntax import parse, write

# None of these cases is about the time limit, and some take a tenth of a second (conftest.py).
pytestmark = pytest.mark.usefixtures("roomy_time_limit")

SIZES = Path(__file__).parents[3] / "spec" / "conformance" / "expressions" / "sizes.json"
CASES = json.loads(SIZES.read_text())["cases"]
BIG = "x" * 200_000  # a context well within the payload limit
CTX = {"big": BIG, "l": list(range(1_000))}


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_size_vector(case: dict[str, Any]) -> None:
    # spec/conformance/expressions/sizes.json: the cases every SDK's evaluator runs too.
    expression = compile_expression(case["expr"])
    if "error" in case:
        with pytest.raises(EvaluationError) as caught:
            expression.evaluate(case["ctx"])
        assert caught.value.kind == case["error"], caught.value.detail
        if case["error"] == "invalid_argument":
            assert caught.value.detail == OVER_SIZE_BUDGET
    else:
        assert expression.evaluate(case["ctx"]) == case["value"]


def test_a_square_is_refused_before_it_is_made() -> None:
    # 200,001 copies of 200,000 characters: 40 GB if replace ran before counting.
    with pytest.raises(EvaluationError) as caught:
        compile_expression("ctx.big.replace('', ctx.big).size()").evaluate(CTX)
    assert caught.value.detail == OVER_SIZE_BUDGET and str(SIZE_BUDGET) in OVER_SIZE_BUDGET


def test_the_budget_is_per_evaluation() -> None:
    # Each evaluation makes 400,000 of the 4,194,304: twenty in a row must all pass.
    expression = compile_expression("(ctx.big + ctx.big).size()")
    assert [expression.evaluate(CTX) for _ in range(20)] == [400_000] * 20


def test_names_with_two_leading_underscores_are_reserved() -> None:
    with pytest.raises(ExpressionInvalid) as caught:
        compile_expression("ctx.l.map(__wiggle_1, __wiggle_1)")
    assert "reserved" in str(caught.value)


@pytest.mark.parametrize(
    "source",
    [
        "a || b && c",
        "(a || b) && c",
        "-(-9223372036854775808)",
        "--1",
        "!(a == b)",
        "a ? b : c ? d : e",
        "(a ? b : c) ? d : e",
        "(a + b) * c - -d % e",
        "a - (b - c)",
        "x.map(i, i * 2).filter(j, j > 2)[0].f",
        "math.greatest([1, 2.5])",
        "(1).size() + 1.5",
        "{'k': [1, {2: 'x'}]}[\"k\"]",
        ".ctx.`content-type`",
        "a in [1, 2] && !(b in {'x': 1})",
    ],
)
def test_the_rewrite_writes_back_the_tree_it_read(source: str) -> None:
    tree = parse(source)
    assert parse(write(tree)) == tree
