"""Compiling an expression: every problem located inside it, never a crash."""

from __future__ import annotations

import pytest

from wiggle.expressions import ExpressionInvalid, compile_expression, profile
from wiggle.expressions._static import check_source, position, tokens


def _problems(source: str, **kw: bool) -> list[tuple[int, int, str]]:
    with pytest.raises(ExpressionInvalid) as caught:
        compile_expression(source, **kw)
    return [(p.line, p.column, p.message) for p in caught.value.problems]


@pytest.mark.parametrize(
    ("source", "line", "column", "says"),
    [
        ("ctx.a +", 1, 8, "ends too early"),
        ("ctx.a.matches('x')", 1, 7, "matches() is not a function of the Wiggle CEL profile"),
        ("nope(1)", 1, 1, "nope() is not a function"),
        ("ctx.a.map(x, ctx.b.map(y, y))", 1, 20, "map() inside another comprehension"),
        ("ctx.a.all(x, x.b.exists(y, y))", 1, 18, "exists() inside another comprehension"),
        ("'abc", 1, 1, "this string is never closed"),
        ("ctx.a\n  + #", 2, 5, "unexpected character '#'"),
        ("undeclared_name > 1", 1, 1, "undeclared reference to 'undeclared_name'"),
        ("", 1, 1, "the expression is empty"),
        ("1 == 1.0", 1, 3, "no matching overload"),
    ],
)
def test_a_refused_expression_is_located(source: str, line: int, column: int, says: str) -> None:
    problems = _problems(source)
    assert (problems[0][0], problems[0][1]) == (line, column), problems
    assert says in problems[0][2]


def test_a_condition_must_be_a_bool():
    (problem,) = _problems("size(ctx.items)", condition=True)
    assert "must be a bool" in problem[2] and "int" in problem[2]
    assert compile_expression("ctx.flag", condition=True).result_type == "dyn"


def test_hostile_shapes_are_refused_before_cel_sees_them():
    deep = "(" * 500 + "1" + ")" * 500
    assert f"nested more than {profile.MAX_DEPTH}" in _problems(deep)[0][2]
    huge = "[" + ",".join(["1"] * 5000) + "]"
    assert "characters long" in _problems(huge)[0][2]
    # A comprehension inside a comprehension is refused wherever it sits in the arguments.
    assert "inside another comprehension" in _problems("[1].map(x, [x].filter(y, y > 0))")[0][2]


def test_strings_and_comments_do_not_count_as_calls_or_brackets():
    assert check_source("'matches(' + \"((((\" + r'\\q' // nope(\n") == []
    assert check_source("'''a\n(b'''.size() > 0") == []


def test_two_comprehensions_side_by_side_are_allowed():
    expression = compile_expression("ctx.a.map(x, x + 1) + ctx.a.filter(x, x > 1)")
    assert expression.evaluate({"a": [1, 2]}) == [2, 3, 2]


def test_math_is_a_namespace_only_at_the_start_of_a_name():
    assert check_source("math.greatest(1, 2)") == []
    problems = check_source("ctx.math.greatest(1)")
    assert problems and "greatest() is not a function" in problems[0].message


def test_positions_count_code_points_and_lines():
    assert position("ab\ncd", 4) == (2, 2)
    assert position("é + x", 4) == (1, 5)
    texts = [t.text for t in tokens("a.b(1u, 2.5e3)")]
    assert texts == ["a", ".", "b", "(", "1u", ",", "2.5e3", ")"]


@pytest.mark.usefixtures("roomy_time_limit")  # 10,000 iterations: not about the time limit
def test_a_comprehension_past_the_iteration_budget_fails_its_evaluation_not_the_process():
    from wiggle.expressions import EvaluationError
    from wiggle.expressions._cel import ITERATION_BUDGET

    expression = compile_expression("ctx.l.map(x, x + 1)")
    assert len(expression.evaluate({"l": list(range(ITERATION_BUDGET // 2))})) == 5000
    with pytest.raises(EvaluationError) as caught:
        expression.evaluate({"l": list(range(ITERATION_BUDGET * 2))})
    assert caught.value.kind == "invalid_argument" and "iterations" in caught.value.detail
