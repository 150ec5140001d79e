"""Semantic checks: what the schema cannot say. Each check is a small function yielding Diagnostics.

Document checks run on a schema-valid flow before compiling (the compiler relies on them: it
parses durations without looking back); graph checks run on the compiled result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import networkx as nx
from jsonschema.exceptions import best_match  # type: ignore[import-untyped,unused-ignore]
from jsonschema.validators import validator_for  # type: ignore[import-untyped,unused-ignore]

from wiggle.compiler._compile import (
    DEFAULT_RETRY,
    END,
    Claim,
    Compiled,
    _Compiler,
    branch_order,
    is_expression_instant,
)
from wiggle.compiler._durations import is_duration_syntax, parse_duration
from wiggle.compiler._loader import Path, SourceMap
from wiggle.errors import Diagnostic
from wiggle.expressions import ExpressionInvalid, compile_expression
from wiggle.filters import BUILTIN_FIELDS

__all__ = ["DOCUMENT_CHECKS", "GRAPH_CHECKS", "iter_steps"]

Step = dict[str, Any]


# These checks also run on documents that failed the schema, so that one pass reports every
# problem; they therefore look before they index and skip whatever has the wrong shape.


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def iter_steps(steps: Any, path: Path) -> Iterator[tuple[Step, Path]]:
    """Every step (a mapping), nested ones included, in document order, with its path."""
    for i, step in enumerate(_list(steps)):
        if isinstance(step, dict):
            here = (*path, i)
            yield step, here
            for sub, sub_path in _nested(step, here):
                yield from iter_steps(sub, sub_path)


def _nested(step: Step, path: Path) -> Iterator[tuple[Any, Path]]:
    for i, arm in enumerate(_list(step.get("choice"))):
        yield _dict(arm).get("steps"), (*path, "choice", i, "steps")
    yield step.get("otherwise"), (*path, "otherwise")
    branches = _dict(step.get("parallel"))
    for name in branch_order(branches):
        yield branches[name], (*path, "parallel", name)
    if "for_each" in step:
        yield step.get("steps"), (*path, "steps")
    yield step.get("on_timeout"), (*path, "on_timeout")
    yield _dict(step.get("loop")).get("steps"), (*path, "loop", "steps")


def _settings(step: Step, path: Path) -> Iterator[tuple[Step, Path]]:
    """The step and its choice arms: everything that may carry `retry` / `timeout`."""
    yield step, path
    for i, arm in enumerate(_list(step.get("choice"))):
        if isinstance(arm, dict):
            yield arm, (*path, "choice", i)


def _durations(step: Step, path: Path) -> Iterator[tuple[Any, Path]]:
    for owner, where in _settings(step, path):
        if "timeout" in owner:
            yield owner["timeout"], (*where, "timeout")
        retry = _dict(owner.get("retry"))
        for key in ("initial", "max"):
            if key in retry:
                yield retry[key], (*where, "retry", key)
    yield step.get("sleep"), (*path, "sleep")


def check_durations(flow: dict[str, Any], source: SourceMap) -> Iterator[Diagnostic]:
    """Every duration is > 0 and at most 365 days (malformed ones are the schema's to report)."""
    for step, path in iter_steps(flow.get("steps"), ("steps",)):
        for text, where in _durations(step, path):
            if isinstance(text, str) and is_duration_syntax(text):
                try:
                    parse_duration(text)
                except ValueError as exc:
                    yield source.diagnostic(where, str(exc))


def check_retry_bounds(flow: dict[str, Any], source: SourceMap) -> Iterator[Diagnostic]:
    """An exponential backoff may not start above its cap (a fixed one only when max is written)."""
    for step, path in iter_steps(flow.get("steps"), ("steps",)):
        for owner, where in _settings(step, path):
            retry = _dict(owner.get("retry"))
            if not isinstance(retry.get("initial"), str) or not isinstance(
                retry.get("max", ""), str
            ):
                continue
            if retry.get("backoff", DEFAULT_RETRY["backoff"]) == "fixed" and "max" not in retry:
                continue
            try:
                initial = parse_duration(retry["initial"])
                cap = parse_duration(retry["max"]) if "max" in retry else DEFAULT_RETRY["max_ms"]
            except ValueError:
                continue  # reported by check_durations
            if initial > cap:
                shown = retry.get("max", f"{cap}ms (the default)")
                yield source.diagnostic(
                    (*where, "retry", "initial"),
                    f"retry initial {retry['initial']} is longer than max {shown}",
                )


def check_await_timeout(flow: dict[str, Any], source: SourceMap) -> Iterator[Diagnostic]:
    """`on_timeout` steps can only run at a deadline, so they need `timeout`."""
    for step, path in iter_steps(flow.get("steps"), ("steps",)):
        if "await" in step and "on_timeout" in step and "timeout" not in step:
            yield source.diagnostic(
                (*path, "on_timeout"),
                f"await {step['await']!r} has on_timeout steps but no timeout to trigger them",
                at_key=True,
            )


def check_input_schema(flow: dict[str, Any], source: SourceMap) -> Iterator[Diagnostic]:
    """The flow's `input` must itself be a valid JSON Schema (draft 2020-12 unless it says)."""
    if "input" not in flow:
        return
    schema = flow["input"]
    if not isinstance(schema, dict | bool):
        return  # the schema reports the type
    try:
        cls = validator_for(schema) if isinstance(schema, dict) else validator_for(True)
        meta = cls(cls.META_SCHEMA)
        errors = list(meta.iter_errors(schema))
    except Exception as exc:  # an unresolvable $schema or $ref: still the user's input
        yield source.diagnostic(("input",), f"input is not a usable JSON Schema: {exc}")
        return
    for error in errors:
        if error.context:
            # An anyOf in the meta-schema (`type`: a name or a list of names): its most
            # specific sub-error says what is wrong.
            error = best_match(error.context)
        where: Path = ("input", *error.absolute_path)
        yield source.diagnostic(where, f"input is not a valid JSON Schema: {error.message}")


def check_search_names(flow: dict[str, Any], source: SourceMap) -> Iterator[Diagnostic]:
    """A search attribute is found by its name in filters: it may not shadow a built-in field."""
    for name in _dict(flow.get("search")):
        if name in BUILTIN_FIELDS:
            yield source.diagnostic(
                ("search", name),
                f"search attribute {name!r} has the name of a built-in filter field "
                f"({', '.join(BUILTIN_FIELDS)}); choose another name",
                at_key=True,
            )


def check_node_ids(compiled: Compiled, source: SourceMap) -> Iterator[Diagnostic]:
    """Node ids are unique, and `end` belongs to the implicit end node."""
    first: dict[str, Claim] = {}
    for claim in compiled.claims:
        if claim.node_id == END:
            message = "node id 'end' is reserved for the end of the flow; set `id:`"
            yield source.diagnostic(claim.path, message, at_key=claim.at_key)
        elif claim.node_id in first:
            earlier = first[claim.node_id]
            line, column = (source.key if earlier.at_key else source.value)(earlier.path)
            yield source.diagnostic(
                claim.path,
                f"duplicate node id {claim.node_id!r} (also used at line {line}, column "
                f"{column}); give one of them an `id:`",
                at_key=claim.at_key,
            )
        else:
            first[claim.node_id] = claim


def check_reachable(compiled: Compiled, source: SourceMap) -> Iterator[Diagnostic]:
    """Every node is reachable from the start (an id clash can orphan one)."""
    graph = compiled.nx
    reached = nx.descendants(graph, graph.graph["start"]) | {graph.graph["start"]}
    where = {c.node_id: c for c in compiled.claims}
    for node_id in graph.nodes:
        if node_id not in reached and node_id in where:
            claim = where[node_id]
            message = f"step {node_id!r} can never be reached"
            yield source.diagnostic(claim.path, message, at_key=claim.at_key)


def _expressions(step: Step, path: Path) -> Iterator[tuple[Any, Path, bool]]:
    """(source, path, is a condition) of every expression a step writes."""
    if isinstance(step.get("filter"), dict):
        yield step["filter"].get("if"), (*path, "filter", "if"), True
    for i, arm in enumerate(_list(step.get("choice"))):
        if isinstance(arm, dict) and "if" in arm:
            yield arm["if"], (*path, "choice", i, "if"), True
    loop = _dict(step.get("loop"))
    if isinstance(loop.get("while"), dict):
        yield loop["while"].get("if"), (*path, "loop", "while", "if"), True
    for key, source in _dict(step.get("set")).items():
        yield source, (*path, "set", key), False
    until = _dict(step.get("sleep")).get("until")
    if isinstance(until, str) and is_expression_instant(until):
        yield until, (*path, "sleep", "until"), False


def check_expressions(flow: dict[str, Any], source: SourceMap) -> Iterator[Diagnostic]:
    """Every expression parses and type-checks under the profile; each problem is reported
    where it is inside the expression (docs/expressions.md)."""
    for step, path in iter_steps(flow.get("steps"), ("steps",)):
        for text, where, condition in _expressions(step, path):
            if not isinstance(text, str) or not text:
                continue  # the schema reports it
            try:
                compile_expression(text, condition=condition)
            except ExpressionInvalid as exc:
                for problem in exc.problems:
                    line, column = source.inside(where, problem.line, problem.column)
                    found = source.diagnostic(where, f"expression: {problem.message}")
                    yield Diagnostic(found.file, line, column, found.message, found.path)


_ACTIVITY_SETTINGS = ("queue", "retry", "timeout")


def check_expression_settings(flow: dict[str, Any], source: SourceMap) -> Iterator[Diagnostic]:
    """`queue`, `retry` and `timeout` belong to a predicate activity: an expression has none
    (writing one would be silently ignored)."""
    for step, path in iter_steps(flow.get("steps"), ("steps",)):
        owners: list[tuple[Step, Path, str]] = []
        if isinstance(step.get("filter"), dict):
            owners.append((step, path, "an expression filter"))
        if isinstance(_dict(step.get("loop")).get("while"), dict):
            owners.append((step, path, "a loop with an expression `while`"))
        for i, arm in enumerate(_list(step.get("choice"))):
            if isinstance(arm, dict) and "if" in arm:
                owners.append((arm, (*path, "choice", i), "an `if` arm"))
        for owner, where, what in owners:
            for key in _ACTIVITY_SETTINGS:
                if key in owner:
                    yield source.diagnostic(
                        (*where, key),
                        f"`{key}` applies to a predicate activity; {what} runs no activity",
                        at_key=True,
                    )


DocumentCheck = Callable[[dict[str, Any], SourceMap], Iterator[Diagnostic]]
GraphCheck = Callable[[Compiled, SourceMap], Iterator[Diagnostic]]

DOCUMENT_CHECKS: tuple[DocumentCheck, ...] = (
    check_search_names,
    check_durations,
    check_retry_bounds,
    check_await_timeout,
    check_input_schema,
    check_expressions,
    check_expression_settings,
)
GRAPH_CHECKS: tuple[GraphCheck, ...] = (check_node_ids, check_reachable)


def duplicate_ids(flow: Any, source: Any) -> list[Any]:
    """Duplicate node ids of a flow that failed other checks, so that they are reported in the
    same pass; nothing when its steps are too malformed to number."""
    try:
        compiler = _Compiler(flow)
        compiler.number(flow["steps"], ("steps",))
        return list(check_node_ids(Compiled(flow, None, compiler.claims), source))
    except Exception:  # malformed beyond numbering: the schema errors already say why
        return []
