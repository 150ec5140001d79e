"""The server's CEL: cel-expr-python (the C++ runtime of cel-spec's own implementers) under the
Wiggle profile. docs/expressions.md says why this library and not another.

`compile_expression` runs the profile's static rules (_static), then CEL's parser and type
checker with every variable declared `dyn`; `Expression.evaluate` maps the context to CEL
(_values.to_cel), evaluates, and maps the result back, turning any CEL error into an
EvaluationError that names its kind.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from cel_expr_python import cel
from cel_expr_python.ext import ext_math, ext_strings

from wiggle.expressions._errors import CompileProblem, EvaluationError, ExpressionInvalid
from wiggle.expressions._static import check_source, position
from wiggle.expressions._values import NotJson, from_cel, to_cel

__all__ = ["Expression", "compile_expression"]

#: cel-expr-python's fixed budget of comprehension iterations per evaluation (cel-cpp's
#: default; the binding does not let it be changed).
ITERATION_BUDGET = 10_000

# "ERROR: <input>:1:4: undeclared reference to 'foo' (in container '')"
_CEL_ERROR = re.compile(r"ERROR: <input>:(\d+):(\d+): (.*)")

#: The error kinds of the profile, by what the library's message says (first match wins).
_KINDS = (
    ("no_such_key", re.compile(r"Key not found|No such key|no such key")),
    ("division_by_zero", re.compile(r"divide by zero|modulus by zero|division by zero")),
    ("overflow", re.compile(r"overflow|out of int64 range|out of uint64 range|OUT_OF_RANGE")),
    ("out_of_range", re.compile(r"Index error: index=|is greater than|is less than|negative")),
    ("type_mismatch", re.compile(r"No matching overloads|non-message type|expected .* type")),
)


@cache
def _env() -> Any:
    return cel.NewEnv(
        variables={
            "ctx": cel.Type.DYN,
            "instance": cel.Type.Map(cel.Type.STRING, cel.Type.DYN),
        },
        extensions=[ext_strings.ExtStrings(), ext_math.ExtMath()],
    )


@dataclass(frozen=True)
class Expression:
    """A checked expression, ready to evaluate any number of times (thread-safe)."""

    source: str
    result_type: str  # CEL's name of the checked type: "bool", "dyn", "int", ...
    _program: Any = field(repr=False, compare=False)

    def evaluate(self, ctx: Any, instance: dict[str, Any] | None = None) -> Any:
        """The JSON value of the expression for this context; EvaluationError when CEL fails
        or the result has no JSON form."""
        try:
            data = {"ctx": to_cel(ctx), "instance": to_cel(instance or {})}
        except TypeError as exc:
            raise EvaluationError(self.source, "invalid_argument", str(exc)) from None
        try:
            value = self._program.eval(data=data)
        except RuntimeError as exc:  # the runtime raises some errors instead of returning them
            raise self._failed(str(exc)) from None
        if value.type() == cel.Type.ERROR:
            raise self._failed(str(value.value()))
        try:
            return from_cel(value.plain_value())
        except NotJson as exc:
            raise EvaluationError(self.source, "not_json", str(exc)) from None

    def _failed(self, message: str) -> EvaluationError:
        """The EvaluationError for one of the runtime's error messages."""
        if "Iteration budget exceeded" in message:
            detail = f"more than {ITERATION_BUDGET} comprehension iterations in one evaluation"
            return EvaluationError(self.source, "invalid_argument", detail)
        return EvaluationError(self.source, _kind(message), _plain(message))

    def condition(self, ctx: Any, instance: dict[str, Any] | None = None) -> bool:
        """`evaluate`, for a choice arm, filter or while: the result must be a bool."""
        value = self.evaluate(ctx, instance)
        if not isinstance(value, bool):
            raise EvaluationError(
                self.source, "not_boolean", f"a condition must be a bool; it gave {value!r}"
            )
        return value


def _kind(message: str) -> str:
    for kind, pattern in _KINDS:
        if pattern.search(message):
            return kind
    return "invalid_argument"


def _plain(message: str) -> str:
    """The library's message without its status prefix ("NOT_FOUND: ...")."""
    return re.sub(r"^[A-Z_]+: ", "", message)


def compile_expression(source: str, *, condition: bool = False) -> Expression:
    """Check `source` against the profile and CEL's type checker; ExpressionInvalid lists
    every problem found, each at a 1-based line and column inside the expression.

    `condition`: the expression decides a branch, so a type other than bool (or dyn, checked
    when evaluated) is an error here."""
    problems = [
        CompileProblem(*position(source, p.offset), p.message) for p in check_source(source)
    ]
    if problems:
        raise ExpressionInvalid(source, problems)
    try:
        program = _env().compile(source)
    except RuntimeError as exc:
        raise ExpressionInvalid(source, _cel_problems(str(exc))) from None
    result_type = program.return_type().name().lower()
    if condition and result_type not in ("bool", "dyn"):
        raise ExpressionInvalid(
            source, [CompileProblem(1, 1, f"a condition must be a bool; its type is {result_type}")]
        )
    return Expression(source, result_type, program)


def _cel_problems(text: str) -> list[CompileProblem]:
    found = [
        CompileProblem(int(m.group(1)), int(m.group(2)), _tidy(m.group(3)))
        for m in _CEL_ERROR.finditer(text)
    ]
    return found or [CompileProblem(1, 1, text.strip().splitlines()[0])]


def _tidy(message: str) -> str:
    message = message.replace(" (in container '')", "")
    if message.startswith("Syntax error: mismatched input '<EOF>'"):
        return "Syntax error: the expression ends too early"
    return message
