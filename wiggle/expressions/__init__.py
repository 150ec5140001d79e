"""Expressions in a flow: CEL under the Wiggle profile (docs/expressions.md).

`compile_expression` checks an expression (the profile's static rules, then CEL's parser and
type checker) and returns an `Expression` to evaluate against a context. The profile's lists
and limits are in `wiggle.expressions.profile`; the vectors every implementation must pass are
in spec/conformance/expressions/.
"""

from __future__ import annotations

from wiggle.expressions import _profile as profile
from wiggle.expressions._cel import Expression, compile_expression
from wiggle.expressions._errors import (
    ERROR_KINDS,
    CompileProblem,
    EvaluationError,
    ExpressionInvalid,
)
from wiggle.expressions._nodes import (
    EXPRESSION_ERROR_TYPE,
    NodeValue,
    evaluate_node,
    evaluate_value,
    failure_message,
)
from wiggle.expressions._values import from_cel, to_cel

__all__ = [
    "ERROR_KINDS",
    "EXPRESSION_ERROR_TYPE",
    "CompileProblem",
    "EvaluationError",
    "Expression",
    "ExpressionInvalid",
    "NodeValue",
    "compile_expression",
    "evaluate_node",
    "evaluate_value",
    "failure_message",
    "from_cel",
    "profile",
    "to_cel",
]
