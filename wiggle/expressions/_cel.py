"""The server's CEL: cel-expr-python (the C++ runtime of cel-spec's own implementers) under the
Wiggle profile. docs/expressions.md says why this library and not another.

`compile_expression` runs the profile's static rules (_static), then CEL's parser and type
checker with every variable declared `dyn`; then it compiles the expression a second time as
_sizing rewrites it, with the counting calls of the size budget in it, and that program is the
one evaluated. `Expression.evaluate` maps the context to CEL (_values.to_cel), evaluates, and
maps the result back, turning any CEL error into an EvaluationError that names its kind.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_math, ext_strings

from wiggle.expressions._errors import CompileProblem, EvaluationError, ExpressionInvalid
from wiggle.expressions._sizing import (
    CHUNK,
    CHUNKS,
    CONTAINS,
    COUNT,
    INDEX_OF,
    JOIN,
    LAST_INDEX_OF,
    LIVE,
    REPLACE,
    SIZE_BUDGET,
    SPLIT,
    counted,
)
from wiggle.expressions._static import check_source, position
from wiggle.expressions._syntax import parse, write
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
    (
        "out_of_range",
        re.compile(r"Index error: index=|is greater than|is less than|negative|index out of range"),
    ),
    ("type_mismatch", re.compile(r"No matching overloads|non-message type|expected .* type")),
)


_VARIABLES = {"ctx": cel.Type.DYN, "instance": cel.Type.Map(cel.Type.STRING, cel.Type.DYN)}

OVER_SIZE_BUDGET = f"the evaluation made more than {SIZE_BUDGET} characters, elements and entries"

#: The profile's time limit: how long one evaluation may run (docs/expressions.md, "Limits").
TIME_LIMIT_S = 1.0
OVER_TIME_LIMIT = "the evaluation ran longer than 1 second"


class _Spent(threading.local):
    """The evaluation running on this thread: what it has made so far, when its time is up, and
    which limit stopped it, if one did. The library calls the evaluator's functions back on the
    thread that called `eval`."""

    total = 0
    deadline = 0.0
    stopped: str | None = None


_spent = _Spent()


def _stop(reason: str) -> None:
    if _spent.stopped is None:  # the first limit reached is the one reported
        _spent.stopped = reason


def _live() -> bool:
    """The guard in every comprehension step (_sizing): may the evaluation go on?"""
    if _spent.stopped is None and time.monotonic() > _spent.deadline:
        _stop(OVER_TIME_LIMIT)
    return _spent.stopped is None


def _count(size: int) -> bool:
    _spent.total += size
    if _spent.total > SIZE_BUDGET:
        _stop(OVER_SIZE_BUDGET)
        raise ValueError(OVER_SIZE_BUDGET)
    return True


def _chunks(length: int) -> list[list[int]]:
    """The indices 0..length-1 in runs of CHUNK, for _sizing's linear map and filter."""
    return [list(range(start, min(start + CHUNK, length))) for start in range(0, length, CHUNK)]


def _offset(text: str, offset: int) -> int:
    if not 0 <= offset <= len(text):
        # The strings extension's own words. A TypeError, which the binding reports as
        # INVALID_ARGUMENT (a ValueError would be OUT_OF_RANGE, read as an overflow): the kind
        # comes from the words, out_of_range as for substring and charAt.
        raise TypeError(f"index out of range: {offset}")
    return offset


def _contains(text: str, part: str) -> bool:
    """The standard `contains`, in Python's linear search."""
    return part in text


def _index_of(text: str, part: str, offset: int = 0) -> int:
    """The strings extension's `indexOf`: the first `part` at or after `offset` (code points)."""
    return text.find(part, _offset(text, offset))


def _split(text: str, separator: str, limit: int = -1) -> list[str]:
    """The strings extension's `split`: at most `limit` parts (all when negative, none at 0);
    an empty separator splits between code points."""
    if limit == 0:
        return []
    if separator == "":
        parts = list(text) or [""]  # an empty string splits into one empty part
        if limit > 0 and len(parts) > limit:
            parts[limit - 1 :] = ["".join(parts[limit - 1 :])]
        return parts
    return text.split(separator, limit - 1 if limit > 0 else -1)


def _last_index_of(text: str, part: str, offset: int | None = None) -> int:
    """The strings extension's `lastIndexOf`: the last `part` that begins at or before
    `offset` (code points; the end when not given)."""
    start = len(text) if offset is None else _offset(text, offset)
    return text.rfind(part, 0, start + len(part))


def _replace(text: str, old: str, new: str, limit: int = -1) -> str:
    """The strings extension's `replace`, its result counted before it is made."""
    found = len(text) + 1 if old == "" else text.count(old)
    if limit >= 0:
        found = min(found, limit)
    _count(len(text) + found * (len(new) - len(old)))
    return text.replace(old, new, limit if limit >= 0 else -1)


def _join(items: list[Any], separator: str = "") -> str:
    """The strings extension's `join`, its result counted before it is made."""
    if not all(isinstance(i, str) for i in items):
        raise TypeError("No matching overloads found : join (the list holds a non-string)")
    _count(sum(len(i) for i in items) + max(len(items) - 1, 0) * len(separator))
    return separator.join(items)


@cache
def _env() -> Any:
    """The profile's environment, with the size budget's functions and cel.bind for _sizing's
    rewrite. An expression cannot call those itself: the static rules refuse every function
    outside the profile before CEL sees the source."""
    text, number, strings = cel.Type.STRING, cel.Type.INT, cel.Type.List(cel.Type.DYN)
    truth = cel.Type.BOOL
    functions = [
        cel.FunctionDecl(LIVE, [cel.Overload(f"{LIVE}_0", truth, [], impl=_live)]),
        cel.FunctionDecl(
            CHUNKS,
            [
                cel.Overload(
                    f"{CHUNKS}_1", cel.Type.List(cel.Type.List(number)), [number], impl=_chunks
                )
            ],
        ),
        cel.FunctionDecl(
            CONTAINS, [cel.Overload(f"{CONTAINS}_2", truth, [text, text], impl=_contains)]
        ),
        cel.FunctionDecl(
            INDEX_OF,
            [
                cel.Overload(f"{INDEX_OF}_2", number, [text, text], impl=_index_of),
                cel.Overload(f"{INDEX_OF}_3", number, [text, text, number], impl=_index_of),
            ],
        ),
        cel.FunctionDecl(
            SPLIT,
            [
                cel.Overload(f"{SPLIT}_2", cel.Type.List(text), [text, text], impl=_split),
                cel.Overload(f"{SPLIT}_3", cel.Type.List(text), [text, text, number], impl=_split),
            ],
        ),
        cel.FunctionDecl(
            LAST_INDEX_OF,
            [
                cel.Overload(f"{LAST_INDEX_OF}_2", number, [text, text], impl=_last_index_of),
                cel.Overload(
                    f"{LAST_INDEX_OF}_3", number, [text, text, number], impl=_last_index_of
                ),
            ],
        ),
        cel.FunctionDecl(
            COUNT, [cel.Overload(f"{COUNT}_int", cel.Type.BOOL, [number], impl=_count)]
        ),
        cel.FunctionDecl(
            REPLACE,
            [
                cel.Overload(f"{REPLACE}_3", text, [text, text, text], impl=_replace),
                cel.Overload(f"{REPLACE}_4", text, [text, text, text, number], impl=_replace),
            ],
        ),
        cel.FunctionDecl(
            JOIN,
            [
                cel.Overload(f"{JOIN}_1", text, [strings], impl=_join),
                cel.Overload(f"{JOIN}_2", text, [strings, text], impl=_join),
            ],
        ),
    ]
    return cel.NewEnv(
        variables=_VARIABLES,
        functions=functions,
        extensions=[ext_strings.ExtStrings(), ext_math.ExtMath(), ext_bindings.ExtBindings()],
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
        _spent.total, _spent.stopped = 0, None
        _spent.deadline = time.monotonic() + TIME_LIMIT_S
        try:
            value = self._program.eval(data=data)
        except RuntimeError as exc:  # the runtime raises some errors instead of returning them
            raise self._failed(str(exc)) from None
        if _spent.stopped is None and time.monotonic() > _spent.deadline:
            _stop(OVER_TIME_LIMIT)  # an evaluation without a loop reads the clock only here
        if _spent.stopped is not None:  # even when `||` or `?:` set the error aside
            raise EvaluationError(self.source, "invalid_argument", _spent.stopped)
        if value.type() == cel.Type.ERROR:
            raise self._failed(str(value.value()))
        try:
            return from_cel(_copied_out(value))
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


def _copied_out(value: Any) -> Any:
    """The library's result as plain Python, read one level at a time and counted as it is
    read: a list the evaluation made of many references to one large value (`ctx.l.map(x,
    ctx.big)`) is small for the library and huge once copied out, so the copy stops as soon
    as it passes the size budget."""
    left = SIZE_BUDGET

    def take(size: int) -> None:
        nonlocal left
        left -= size
        if left < 0:
            raise NotJson(
                f"the result holds more than {SIZE_BUDGET} characters, elements and entries"
            )

    def walk(item: Any) -> Any:
        got = item.value()
        if isinstance(got, list):
            take(len(got))
            return [walk(i) for i in got]
        if isinstance(got, dict):
            take(len(got))
            return {k: walk(v) for k, v in got.items()}
        if isinstance(got, str):
            take(len(got))
        return got

    return walk(value)


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
        checked = _env().compile(source)
    except RuntimeError as exc:
        raise ExpressionInvalid(source, _cel_problems(str(exc))) from None
    result_type = checked.return_type().name().lower()
    if condition and result_type not in ("bool", "dyn"):
        raise ExpressionInvalid(
            source, [CompileProblem(1, 1, f"a condition must be a bool; its type is {result_type}")]
        )
    try:
        program = _env().compile(write(counted(parse(source))))
    except RuntimeError as exc:  # CEL's parser depth, which the counting calls add to
        detail = _tidy(str(exc).splitlines()[0])
        problem = f"too deeply nested once its sizes are counted (docs/expressions.md): {detail}"
        raise ExpressionInvalid(source, [CompileProblem(1, 1, problem)]) from None
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
