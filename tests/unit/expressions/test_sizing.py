"""The size budget (docs/expressions.md, "Limits"): what an evaluation makes is counted, and an
evaluation that makes too much fails its node instead of filling the server's memory.

Each hostile case below would make hundreds of megabytes or more if nothing stopped it (the sizes
are in the comments); the budget stops it after a few megabytes."""

from __future__ import annotations

import pytest

from wiggle.expressions import EvaluationError, ExpressionInvalid, compile_expression
from wiggle.expressions._sizing import SIZE_BUDGET
from wiggle.expressions._syntax import parse, write

BIG = "x" * 200_000  # a context well within the payload limit
CTX = {"big": BIG, "l": list(range(1_000)), "nested": {"k": BIG}, "words": ["a"] * 1_000}


def _fails_over_budget(source: str, ctx: object = CTX) -> None:
    with pytest.raises(EvaluationError) as caught:
        compile_expression(source).evaluate(ctx)
    assert caught.value.kind == "invalid_argument"
    assert str(SIZE_BUDGET) in caught.value.detail
    assert source in str(caught.value)


@pytest.mark.parametrize(
    "source",
    [
        "ctx.l.map(x, ctx.big + ctx.big).size()",  # 1,000 strings of 400,000: 400 MB
        "ctx.big.replace('', ctx.big).size()",  # 200,001 copies of 200,000: 40 GB
        "ctx.l.map(x, ctx.big).join('').size()",  # 1,000 copies in one string: 200 MB
        "ctx.words.join(ctx.big).size()",  # 999 separators of 200,000: 200 MB
        "ctx.l.map(x, [ctx.big, ctx.big]).size()",  # lists of references, 400 MB once copied
        "ctx.l.map(x, ctx.big.upperAscii()).size()",  # 1,000 copies: 200 MB
        "ctx.l.filter(x, (ctx.big + 'y').size() > 0).size()",  # 200 MB made and dropped
    ],
)
def test_an_evaluation_that_makes_too_much_fails(source: str) -> None:
    _fails_over_budget(source)


def test_a_result_of_many_references_to_one_value_is_refused_as_it_is_copied_out() -> None:
    # The library holds 1,000 references to one map (cheap); copied out they are 200 MB.
    with pytest.raises(EvaluationError) as caught:
        compile_expression("ctx.l.map(x, ctx.nested)").evaluate(CTX)
    assert caught.value.kind == "not_json"
    assert str(SIZE_BUDGET) in caught.value.detail


def test_going_past_the_budget_fails_even_where_cel_would_set_the_error_aside() -> None:
    # `error || true` is true in CEL; a spent budget is not an error the expression may drop.
    _fails_over_budget("ctx.l.map(x, ctx.big + ctx.big).size() > 0 || true")
    _fails_over_budget("ctx.l.exists(x, (ctx.big + ctx.big).size() == 0) ? 1 : 2")


@pytest.mark.parametrize(
    ("source", "value"),
    [
        ("ctx.big.replace('x', 'yy').size()", 400_000),
        ("(ctx.big + ctx.big).size()", 400_000),
        ("ctx.l.map(x, x + 1).size()", 1_000),
        ("ctx.l.map(x, string(x)).join(',').size()", 3_889),
        ("ctx.words.join('-').size()", 1_999),
        ("ctx.l.filter(x, x % 2 == 0).size()", 500),
        ("[ctx.big, 'a'].size()", 2),
        ("{'a': ctx.big}.a.size()", 200_000),
        ("ctx.big.substring(0, 5) + ctx.nested.k.substring(0, 2)", "xxxxxxx"),
    ],
)
def test_what_stays_within_the_budget_evaluates_as_before(source: str, value: object) -> None:
    assert compile_expression(source).evaluate(CTX) == value


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
