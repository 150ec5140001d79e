"""Evaluating a graph's expression nodes (`condition`, `set`): the one rule the server and the
Python workers share, so that both give a node the same value.

Pure: a node, a context and the instance's identity in, a `NodeValue` out. A failure is a
value too (`error`), never an exception: the caller records it as the node's non-retryable
failure (docs/worker-protocol.md, "Expression nodes in a run").
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from wiggle.expressions._cel import Expression, compile_expression
from wiggle.expressions._errors import EvaluationError, ExpressionInvalid
from wiggle.graph import Condition, SetValues
from wiggle.jsonvalue import type_name

__all__ = [
    "EXPRESSION_ERROR_TYPE",
    "NodeValue",
    "evaluate_node",
    "evaluate_value",
    "failure_message",
]

#: The `error_type` of an expression node's failure, in every language.
EXPRESSION_ERROR_TYPE = "ExpressionError"


@dataclass(frozen=True)
class NodeValue:
    """What an expression node gave: a condition's boolean (`predicate`), a set's new context
    and the values it computed, or the error that failed the node."""

    predicate: bool | None = None
    context: Any = None
    values: dict[str, Any] | None = None
    error: EvaluationError | None = None


def failure_message(error: EvaluationError) -> str:
    """`<kind>: <detail> (expression <source>)`: starts with the kind in every language."""
    if not error.source:
        return f"{error.kind}: {error.detail}"
    return f"{error.kind}: {error.detail} (expression {error.source!r})"


@lru_cache(maxsize=4096)
def _compiled(source: str, condition: bool) -> Expression | ExpressionInvalid:
    try:
        return compile_expression(source, condition=condition)
    except ExpressionInvalid as exc:
        return exc


def _expression(source: str, condition: bool) -> Expression:
    found = _compiled(source, condition)
    if isinstance(found, ExpressionInvalid):
        # A stored graph that the compiler would refuse (written by hand, or by an older
        # profile): the node fails, saying what the checker says.
        raise EvaluationError(source, "invalid_argument", f"does not compile: {found}")
    return found


def evaluate_node(node: Condition | SetValues, ctx: Any, instance: dict[str, Any]) -> NodeValue:
    """The value of `node` for the context `ctx` of the instance {"id": ..., "flow": ...}."""
    try:
        if isinstance(node, Condition):
            return NodeValue(predicate=_expression(node.expression, True).condition(ctx, instance))
        if not isinstance(ctx, dict):
            raise EvaluationError(
                "",
                "type_mismatch",
                f"set {node.id!r} needs an object context; the context is {type_name(ctx)}",
            )
        # In the canonical graph's key order, whether this graph was read from it or compiled
        # just now: the first failure and the new keys' order are those of every SDK.
        values = {
            key: _expression(source, False).evaluate(ctx, instance)
            for key, source in sorted(node.values.items())
        }
        return NodeValue(context={**ctx, **values}, values=values)
    except EvaluationError as exc:
        return NodeValue(error=exc)


def evaluate_value(source: str, ctx: Any, instance: dict[str, Any]) -> Any:
    """The JSON value of one expression that is not a condition (a sleep's `until`); raises
    EvaluationError as the node's failure."""
    return _expression(source, False).evaluate(ctx, instance)
