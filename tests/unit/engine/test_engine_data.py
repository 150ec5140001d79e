"""Pure helpers of the engine: JSON pointers, RFC 3339 instants, batch planning."""

from __future__ import annotations

import pytest

from wiggle.compiler import load_flow
from wiggle.engine import StepFailure, StepOutcome
from wiggle.engine.machine.reports import plan_steps
from wiggle.engine.machine.tx import Inst, Tok
from wiggle.engine.model.data import MISSING, parse_instant_ms, resolve_pointer, type_name
from wiggle.engine.model.types import InstanceStatus, TokenState
from wiggle.errors import WrongPath
from wiggle.graph import ExecutionMode
from wiggle.traversal import Handback

DOC = {"a": {"b/c": [10, {"m~n": 1}]}, "": 5}


@pytest.mark.parametrize(
    "pointer,expected",
    [
        ("", DOC),
        ("/a/b~1c/0", 10),
        ("/a/b~1c/1/m~0n", 1),
        ("/", 5),
        ("/a/b~1c/2", MISSING),
        ("/a/b~1c/01", MISSING),
        ("/a/b~1c/-", MISSING),
        ("/x", MISSING),
        ("a", MISSING),
        ("/a/b~1c/0/deeper", MISSING),
    ],
)
def test_resolve_pointer(pointer, expected):
    assert resolve_pointer(DOC, pointer) is expected or resolve_pointer(DOC, pointer) == expected


@pytest.mark.parametrize(
    "value,expected",
    [
        ("1970-01-01T00:00:01Z", 1000),
        ("1970-01-01T00:00:01.250Z", 1250),
        ("1970-01-01T01:00:00+01:00", 0),
        ("1970-01-01t00:00:00z", 0),
        ("1970-01-01T00:00:00", None),  # no offset
        ("1970-01-01", None),
        ("soon", None),
        (12, None),
        (None, None),
    ],
)
def test_parse_instant(value, expected):
    assert parse_instant_ms(value) == expected


def test_type_names():
    assert [type_name(v) for v in (None, True, 1, 1.5, "s", [], {})] == [
        "null",
        "a boolean",
        "a number",
        "a number",
        "a string",
        "a list",
        "an object",
    ]


FLOW = load_flow(
    "wiggle: 1\nname: p\nsteps:\n  - task: a\n  - filter: keep\n  - task: b\n"
    "    queue: other\n  - sleep: 1s\n  - task: c\n"
)


def _at(node: str) -> tuple[Inst, Tok]:
    inst = Inst(
        "i",
        "i",
        "p",
        FLOW.version,
        InstanceStatus.RUNNING,
        ExecutionMode.SERVER,
        FLOW.graph,
        None,
        None,
    )
    tok = Tok("t", "i", FLOW.version, node, TokenState.LEASED, {"v": 0})
    return inst, tok


def test_plan_follows_predicates_across_queues_and_stops_at_boundaries():
    inst, tok = _at("a")
    plan = plan_steps(
        inst,
        tok,
        [
            StepOutcome("a", context={"v": 1}),
            StepOutcome("keep", predicate=True),
            StepOutcome("b", context={"v": 2}),
        ],
    )
    assert [n for n, _, _ in plan.completed] == ["a", "keep", "b"]
    assert plan.context == {"v": 2}
    assert plan.end is not None and plan.end.next_node == "sleep-1"
    with pytest.raises(WrongPath, match="sleep"):
        plan_steps(
            inst,
            tok,
            [
                StepOutcome("a", context=1),
                StepOutcome("keep", predicate=True),
                StepOutcome("b", context=2),
                StepOutcome("c", context=3),
            ],
        )


def test_plan_filter_false_ends_and_non_boolean_fails():
    inst, tok = _at("keep")
    plan = plan_steps(inst, tok, [StepOutcome("keep", predicate=False)])
    assert plan.end is not None and plan.end.handback is Handback.FILTERED
    plan = plan_steps(inst, tok, [StepOutcome("keep", context="yes")])
    assert plan.failure is not None
    node, failure = plan.failure
    assert node == "keep" and failure.non_retryable
    assert failure.message == "predicate 'keep' returned a string, not a JSON boolean"


def test_plan_failure_keeps_the_prefix_context():
    inst, tok = _at("a")
    plan = plan_steps(
        inst,
        tok,
        [StepOutcome("a", context={"v": 9}), StepOutcome("keep", failure=StepFailure("x"))],
    )
    assert plan.context == {"v": 9}
    assert plan.failure == ("keep", StepFailure("x"))
