"""The time limit (docs/expressions.md, "The time limit"): an evaluation that would read for
seconds or minutes stops at about one second and fails its node, and the string searches are
linear, so that no single call holds an evaluation.

The cases (spec/conformance/expressions/time.json) are the ones every SDK's evaluator runs; their
contexts are too large to write out and are built from the file's `$` forms.

The limit is wall-clock time, which a loaded machine stretches, so no test here asserts how fast
anything is (that is for benchmarks): an evaluation that must end within the limit runs under a
limit of a minute (conftest.py), and one that must reach it is checked for the limit's error,
with at most a bound that no loaded machine comes near."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from wiggle.expressions import EvaluationError, compile_expression
from wiggle.expressions._cel import OVER_SIZE_BUDGET, OVER_TIME_LIMIT, TIME_LIMIT_S

TIME = Path(__file__).parents[3] / "spec" / "conformance" / "expressions" / "time.json"
CASES = json.loads(TIME.read_text())["cases"]


def built(value: Any) -> Any:
    """A case's context with its `$` forms built (the file's comment says what each is)."""
    if isinstance(value, list):
        return [built(v) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        ((key, arg),) = value.items()
        if key == "$repeat":
            return arg[0] * arg[1]
        if key == "$range":
            return list(range(arg))
        if key == "$fill":
            return [built(arg[0]) for _ in range(arg[1])]
        if key == "$concat":
            return "".join(built(a) for a in arg)
    return {k: built(v) for k, v in value.items()}


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_time_vector(case: dict[str, Any], request: pytest.FixtureRequest) -> None:
    expression = compile_expression(case["expr"])
    ctx = built(case["ctx"])
    if "error" in case:
        # Under a tenth of the profile's limit (brief_time_limit): each would run for ten seconds
        # or more without it, and must end with the limit's error (or the size budget's).
        request.getfixturevalue("brief_time_limit")
        with pytest.raises(EvaluationError) as caught:
            expression.evaluate(ctx)
        assert caught.value.kind == case["error"], caught.value.detail
        assert caught.value.detail in (OVER_TIME_LIMIT, OVER_SIZE_BUDGET)
    else:
        # What a value case checks is that the evaluation is linear: it takes a tenth of a second
        # here, a search or a loop that is not takes minutes. Under a limit of a minute a loaded
        # machine cannot make the first fail, and the second still does.
        request.getfixturevalue("roomy_time_limit")
        assert expression.evaluate(ctx) == case["value"]


def test_the_profile_limit_is_a_second() -> None:
    # docs/expressions.md, "The time limit"; the vectors above run under a briefer one.
    from wiggle.expressions import _cel

    assert TIME_LIMIT_S == _cel.TIME_LIMIT_S == 1.0


#: A bound on how long an evaluation that reaches a limit may take: far past the limit, which a
#: loaded machine stretches by at most one iteration's work, and far short of the minute and more
#: that the evaluations below would run for without their guard.
LONG_BEFORE_THE_END_S = 30.0


def test_a_loop_that_would_read_for_half_a_minute_stops_at_the_limit() -> None:
    # Without the limit this reads 2,000,000 code points 54,000 times: a minute on an idle
    # machine (a third of it took 20 s), minutes on a loaded one. The evaluator reads the clock
    # once more when the library returns, so the detail alone would not show that the guard
    # stopped the loop; the bound does, and a loaded machine does not come near it (one iteration
    # is about 10 ms of work). It ran for the limit at least, which no machine can shorten.
    ctx = {"a": "a" * 2_000_000, "l": list(range(9_000))}
    expression = compile_expression(f"ctx.l.all(x, {' + '.join(['size(ctx.a)'] * 6)} > 0)")
    began = time.monotonic()
    with pytest.raises(EvaluationError) as caught:
        expression.evaluate(ctx)
    took = time.monotonic() - began
    assert caught.value.kind == "invalid_argument"
    assert caught.value.detail == OVER_TIME_LIMIT
    assert TIME_LIMIT_S <= took < LONG_BEFORE_THE_END_S, took


def test_a_spent_size_budget_ends_the_loop_that_spent_it() -> None:
    # Each step makes 2,000,001 characters: the budget is spent at the third. The library turns
    # the counting call's failure into an error value that `all` carries on past; without the
    # guard the loop went on concatenating for a minute (measured: 59 s) before failing.
    # The bound tells the two apart on any machine; the budget's detail alone would not, as the
    # first limit reached is the one reported.
    ctx = {"a": "a" * 2_000_000, "l": list(range(9_000))}
    expression = compile_expression("ctx.l.all(x, ctx.a < ctx.a + 'x')")
    began = time.monotonic()
    with pytest.raises(EvaluationError) as caught:
        expression.evaluate(ctx)
    assert caught.value.detail == OVER_SIZE_BUDGET
    assert time.monotonic() - began < LONG_BEFORE_THE_END_S


def test_the_limit_is_per_evaluation() -> None:
    # Many evaluations in a row, more than the limit in all, pass. Each is small (300 elements,
    # filtered in runs of 100: about a millisecond), so that no loaded machine stretches one to
    # the limit.
    expression = compile_expression("ctx.l.filter(x, x % 7 == 0).size()")
    ctx = {"l": list(range(300))}
    began = time.monotonic()
    results = []
    while time.monotonic() - began < 1.5 * TIME_LIMIT_S:
        results.append(expression.evaluate(ctx))
    assert set(results) == {43}


@pytest.mark.parametrize(
    ("source", "value"),
    [
        ("'abc'.indexOf('', 3)", 3),
        ("'abcabc'.indexOf('c', 3)", 5),
        ("'abcabc'.lastIndexOf('c', 4)", 2),
        ("'aaa'.lastIndexOf('aa')", 1),
        ("'aaa'.lastIndexOf('aa', 0)", 0),
        ("'abc'.lastIndexOf('', 2)", 2),
        ("'abc'.lastIndexOf('')", 3),
        ("'😀a😀'.indexOf('😀', 1)", 2),
        ("'😀a😀'.lastIndexOf('😀')", 2),
        ("'abc'.contains('')", True),
        ("''.lastIndexOf('x')", -1),
    ],
)
def test_the_searches_keep_the_libraries_answers(source: str, value: Any) -> None:
    assert compile_expression(source).evaluate({}) == value


@pytest.mark.parametrize("source", ["'abc'.indexOf('', 4)", "'abc'.lastIndexOf('c', -1)"])
def test_a_search_offset_out_of_range_is_out_of_range(source: str) -> None:
    with pytest.raises(EvaluationError) as caught:
        compile_expression(source).evaluate({})
    assert caught.value.kind == "out_of_range"
    assert "index out of range" in caught.value.detail


def test_a_search_of_a_non_string_is_a_type_mismatch() -> None:
    with pytest.raises(EvaluationError) as caught:
        compile_expression("ctx.n.contains('a')").evaluate({"n": 1})
    assert caught.value.kind == "type_mismatch"
