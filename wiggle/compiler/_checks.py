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
from wiggle.compiler._loader import Path, SourceMap, pointer
from wiggle.errors import Diagnostic
from wiggle.expressions import Expression, ExpressionInvalid, compile_expression
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
    if "human" in step:
        yield step.get("due"), (*path, "due")
        for i, text in enumerate(_list(step.get("remind"))):
            yield text, (*path, "remind", i)


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
        for block in ("await", "human"):
            if block in step and "on_timeout" in step and "timeout" not in step:
                yield source.diagnostic(
                    (*path, "on_timeout"),
                    f"{_block_name(step, block)} has on_timeout steps but no timeout to trigger "
                    "them",
                    at_key=True,
                )


def _block_name(step: Step, block: str) -> str:
    """`await 'kyc'`, `human step 'approve'`: a step named in a message."""
    what = "human step" if block == "human" else block
    return f"{what} {step[block]!r}"


def _schema_problems(
    schema: Any, where: Path, what: str, source: SourceMap
) -> Iterator[Diagnostic]:
    """`schema` (the value at `where`) must itself be a valid JSON Schema (draft 2020-12 unless
    it says otherwise); each problem is reported where it is inside it."""
    if not isinstance(schema, dict | bool):
        return  # the schema reports the type
    try:
        cls = validator_for(schema) if isinstance(schema, dict) else validator_for(True)
        meta = cls(cls.META_SCHEMA)
        errors = list(meta.iter_errors(schema))
    except Exception as exc:  # an unresolvable $schema or $ref: still the user's input
        yield source.diagnostic(where, f"{what} is not a usable JSON Schema: {exc}")
        return
    for error in errors:
        if error.context:
            # An anyOf in the meta-schema (`type`: a name or a list of names): its most
            # specific sub-error says what is wrong.
            error = best_match(error.context)
        at: Path = (*where, *error.absolute_path)
        yield source.diagnostic(at, f"{what} is not a valid JSON Schema: {error.message}")


def check_input_schema(flow: dict[str, Any], source: SourceMap) -> Iterator[Diagnostic]:
    """The flow's `input` must itself be a valid JSON Schema (draft 2020-12 unless it says)."""
    if "input" in flow:
        yield from _schema_problems(flow["input"], ("input",), "input", source)


def _fixed(value: Any) -> str | None:
    """A name written out (not `{expr: ...}`), or None."""
    return value if isinstance(value, str) else None


def check_human(flow: dict[str, Any], source: SourceMap) -> Iterator[Diagnostic]:
    """What the schema cannot say of a human step: its form is a JSON Schema, someone can take
    the task, the answer goes one way, and its times and count can be met."""
    for step, path in iter_steps(flow.get("steps"), ("steps",)):
        if "human" not in step:
            continue
        name = _block_name(step, "human")
        if "form" in step:
            yield from _schema_problems(step["form"], (*path, "form"), "form", source)
        if "assignee" not in step and "candidates" not in step:
            yield source.diagnostic(
                (*path, "human"),
                f"{name} needs an `assignee` or `candidates`: nobody could take the task",
                at_key=True,
            )
        if "into" in step and "apply" in step:
            yield source.diagnostic(
                (*path, "apply"),
                f"{name} has both `into` and `apply`; the answer goes into the context one way: "
                "`into` puts it under a key, `apply` runs an activity on it",
                at_key=True,
            )
        for key in ("queue", "retry"):
            if key in step and "apply" not in step:
                yield source.diagnostic(
                    (*path, key),
                    f"`{key}` applies to the `apply` activity; {name} has none",
                    at_key=True,
                )
        yield from _human_people(step, path, name, source)
        yield from _human_times(step, path, name, source)


def _human_people(step: Step, path: Path, name: str, source: SourceMap) -> Iterator[Diagnostic]:
    """`approvals` can be met: when every person who may take the task is written out (no
    group, no expression), there must be that many of them."""
    approvals = step.get("approvals")
    if not isinstance(approvals, int) or isinstance(approvals, bool) or approvals <= 1:
        return
    candidates = _dict(step.get("candidates"))
    people = _list(candidates.get("people"))
    written = [step["assignee"]] if "assignee" in step else []
    written += people
    if candidates.get("groups") or not all(_fixed(p) is not None for p in written):
        return  # who they are is known only when the task is created
    distinct = sorted(set(written))
    if len(distinct) < approvals:
        shown = ", ".join(distinct)
        yield source.diagnostic(
            (*path, "approvals"),
            f"{name} needs {approvals} different people to answer, but only {len(distinct)} "
            f"may take it ({shown}); add candidates or lower `approvals`",
        )


def _ms(text: Any) -> int | None:
    """A well-formed duration in range, in milliseconds; None otherwise (reported elsewhere)."""
    if not isinstance(text, str) or not is_duration_syntax(text):
        return None
    try:
        return parse_duration(text)
    except ValueError:
        return None


def _human_times(step: Step, path: Path, name: str, source: SourceMap) -> Iterator[Diagnostic]:
    """No two reminders at the same time, and nothing promised after the deadline."""
    deadline = _ms(step.get("timeout"))
    due = _ms(step.get("due"))
    if due is not None and deadline is not None and due > deadline:
        yield source.diagnostic(
            (*path, "due"),
            f"{name} would be due {step['due']} after it is created, later than its deadline "
            f"(timeout {step['timeout']}), when the flow stops waiting for the answer",
        )
    seen: dict[int, str] = {}
    for i, text in enumerate(_list(step.get("remind"))):
        ms = _ms(text)
        if ms is None:
            continue
        if ms in seen:
            yield source.diagnostic(
                (*path, "remind", i), f"reminder {text} is the same time as reminder {seen[ms]}"
            )
            continue
        seen[ms] = text
        if deadline is not None and ms >= deadline:
            yield source.diagnostic(
                (*path, "remind", i),
                f"reminder {text} would never be sent: the flow stops waiting for {name} at "
                f"its deadline (timeout {step['timeout']})",
            )


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
                f"{column}); {_rename_hint(earlier, claim)}",
                at_key=claim.at_key,
            )
        else:
            first[claim.node_id] = claim


def _rename_hint(earlier: Claim, later: Claim) -> str:
    """A human step's name is its id (it takes no `id:`): the hint says what can be renamed."""
    human = [c.path[-1] == "human" for c in (earlier, later)]
    if all(human):
        return "give one of the human steps another name"
    if any(human):
        return "give the other step an `id:`, or the human step another name"
    return "give one of them an `id:`"


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


#: What a human step's computed value must give: (CEL types allowed, in words).
_TEXT = (frozenset({"string", "dyn"}), "a string")
_NAMES = (
    frozenset({"string", "dyn", "list<string>", "list<dyn>"}),
    "a string or a list of strings",
)


def _computed(
    step: Step, path: Path
) -> Iterator[tuple[Any, Path, str, tuple[frozenset[str], str]]]:
    """(source, path, what, wanted) of every `{expr: ...}` value of a human step."""
    if "human" not in step:
        return
    for key, wanted in (("title", _TEXT), ("instructions", _TEXT), ("assignee", _TEXT)):
        value = step.get(key)
        if isinstance(value, dict) and "expr" in value:
            yield value["expr"], (*path, key, "expr"), f"the {key}", wanted
    for group in ("people", "groups"):
        for i, value in enumerate(_list(_dict(step.get("candidates")).get(group))):
            if isinstance(value, dict) and "expr" in value:
                what = f"an entry of candidates.{group}"
                yield value["expr"], (*path, "candidates", group, i, "expr"), what, _NAMES


def _compile(
    text: str, where: Path, condition: bool, source: SourceMap
) -> tuple[Expression | None, list[Diagnostic]]:
    """One expression compiled, or each of its problems where it is inside it."""
    try:
        return compile_expression(text, condition=condition), []
    except ExpressionInvalid as exc:
        found = []
        for problem in exc.problems:
            line, column = source.inside(where, problem.line, problem.column)
            at = source.diagnostic(where, f"expression: {problem.message}")
            found.append(Diagnostic(at.file, line, column, at.message, at.path))
        return None, found


def check_expressions(flow: dict[str, Any], source: SourceMap) -> Iterator[Diagnostic]:
    """Every expression parses and type-checks under the profile; each problem is reported
    where it is inside the expression (docs/expressions.md). A human step's computed value
    must also give what its place needs (a string; a candidate, a list of strings too)."""
    for step, path in iter_steps(flow.get("steps"), ("steps",)):
        for text, where, condition in _expressions(step, path):
            if not isinstance(text, str) or not text:
                continue  # the schema reports it
            yield from _compile(text, where, condition, source)[1]
        for text, where, what, (types, words) in _computed(step, path):
            if not isinstance(text, str) or not text:
                continue  # the schema reports it
            compiled, problems = _compile(text, where, False, source)
            yield from problems
            if compiled is not None and compiled.result_type not in types:
                line, column = source.inside(where, 1, 1)
                message = f"expression: {what} must be {words}; its type is {compiled.result_type}"
                yield Diagnostic(source.file, line, column, message, pointer(where))


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
    check_human,
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
