"""The errors of an expression: refused when compiled, or failed when evaluated."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from wiggle.errors import WiggleError

__all__ = ["ERROR_KINDS", "CompileProblem", "EvaluationError", "ExpressionInvalid"]

#: What an evaluation error can be (docs/expressions.md, "Errors").
ERROR_KINDS = frozenset(
    {
        "no_such_key",  # a map (the context is one) has no such key
        "type_mismatch",  # no overload for these argument types (int + string, 1 < "a")
        "division_by_zero",
        "overflow",  # an int past 64 bits, a double too large for int()
        "out_of_range",  # a list index, substring() or charAt() past the end
        "invalid_argument",  # a conversion that cannot be made (int("x"), timestamp("nope"))
        "not_json",  # the result has no JSON form (bytes, NaN, an int past 2^53 - 1)
        "not_boolean",  # a condition gave something other than true or false
    }
)


@dataclass(frozen=True)
class CompileProblem:
    """One problem in an expression, 1-based `line` and `column` inside its source."""

    line: int
    column: int
    message: str


class ExpressionInvalid(WiggleError):
    """An expression the profile or CEL's checker refuses; `problems` are all of them."""

    def __init__(self, source: str, problems: Sequence[CompileProblem]) -> None:
        self.source = source
        self.problems = list(problems)
        first = self.problems[0]
        super().__init__(f"{first.line}:{first.column}: {first.message}")


class EvaluationError(WiggleError):
    """An expression that failed when evaluated: a non-retryable failure of its node."""

    def __init__(self, source: str, kind: str, detail: str) -> None:
        assert kind in ERROR_KINDS, kind
        self.source = source
        self.kind = kind
        self.detail = detail
        super().__init__(f"expression {source!r} failed ({kind}): {detail}")
