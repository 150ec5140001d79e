"""wiggle.modes: one comparison of how the modes ended a run, and a flow as each mode runs it.

Each test is one clause of a `Rule` or of `Ending`; the three tools that judge mode agreement
(the corpus, `wiggle conformance --flow`, `wiggle test`) are tested through their own reports
elsewhere.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from wiggle.compiler import load_flow
from wiggle.modes import (
    CORPUS,
    EXACT,
    LIVE,
    MODES,
    Ending,
    Rule,
    compiled_in_mode,
    differences,
    flow_queues,
)

NONE_READ = object()  # a caller's sentinel for "no context read"


def _aspects(endings: list[Ending], rule: Rule) -> list[tuple[str, str, str]]:
    return [(d.aspect, d.other.mode, d.step) for d in differences(endings, rule)]


def test_endings_alike_agree_under_every_rule() -> None:
    one = dict(status="COMPLETED", context={"n": 1}, reason="", steps={"a": 1}, path=["a"])
    endings = [Ending(mode, **one) for mode in MODES]  # type: ignore[arg-type]
    for rule in (EXACT, LIVE, CORPUS):
        assert differences(endings, rule) == []


def test_fewer_than_two_endings_have_nothing_to_differ_in() -> None:
    assert differences([], EXACT) == []
    assert differences([Ending("SERVER", "FAILED")], EXACT) == []


def test_status_and_context_count_under_every_rule() -> None:
    endings = [
        Ending("SERVER", "COMPLETED", {"n": 1}),
        Ending("LOCAL_SYNC", "FAILED", {"n": 1}),
        Ending("LOCAL_ASYNC", "COMPLETED", {"n": 1.0}),  # 1 is not 1.0
    ]
    for rule in (EXACT, LIVE, CORPUS):
        assert _aspects(endings, rule) == [
            ("status", "LOCAL_SYNC", ""),
            ("context", "LOCAL_ASYNC", ""),
        ]


def test_every_ending_is_compared_with_the_first() -> None:
    endings = [Ending(m, "COMPLETED", c) for m, c in zip(MODES, (1, 2, 2), strict=True)]
    found = differences(endings, EXACT)
    assert [(d.reference.mode, d.other.mode) for d in found] == [
        ("SERVER", "LOCAL_SYNC"),
        ("SERVER", "LOCAL_ASYNC"),
    ]


def test_a_sentinel_context_equals_only_itself() -> None:
    same = [Ending("SERVER", "COMPLETED", NONE_READ), Ending("LOCAL_SYNC", "COMPLETED", NONE_READ)]
    assert differences(same, EXACT) == []
    apart = [Ending("SERVER", "COMPLETED", NONE_READ), Ending("LOCAL_SYNC", "COMPLETED", None)]
    assert _aspects(apart, EXACT) == [("context", "LOCAL_SYNC", "")]


def test_the_reason_counts_only_where_the_rule_says() -> None:
    endings = [
        Ending("SERVER", "FAILED", None, "step a failed: boom"),
        Ending("LOCAL_SYNC", "FAILED", None, "step a failed: lease expired"),
    ]
    assert _aspects(endings, EXACT) == [("reason", "LOCAL_SYNC", "")]
    assert differences(endings, LIVE) == []
    assert differences(endings, CORPUS) == []


def test_a_cancelled_runs_context_counts_only_where_the_rule_says() -> None:
    endings = [
        Ending("SERVER", "CANCELLED", {"done": ["a", "b"]}),
        Ending("LOCAL_ASYNC", "CANCELLED", {"done": []}),
    ]
    assert _aspects(endings, EXACT) == [("context", "LOCAL_ASYNC", "")]
    assert differences(endings, LIVE) == []
    assert differences(endings, CORPUS) == []
    # Only when both were cancelled: a context that parted on the way to another end counts.
    other_end = [endings[0], Ending("LOCAL_ASYNC", "FAILED", {"done": []})]
    assert [a for a, _, _ in _aspects(other_end, CORPUS)] == ["status", "context"]


def test_step_counts_count_unless_the_rule_asks_only_whether_each_ran() -> None:
    endings = [
        Ending("SERVER", "COMPLETED", steps={"a": 1, "b": 1, "c": 0}),
        Ending("LOCAL_SYNC", "COMPLETED", steps={"a": 2, "d": 1}),
    ]
    assert _aspects(endings, EXACT) == [
        ("steps", "LOCAL_SYNC", "a"),
        ("steps", "LOCAL_SYNC", "b"),
        ("steps", "LOCAL_SYNC", "d"),
    ]
    # Whether: `a` ran in both, `c` (counted 0 times) ran in neither.
    assert _aspects(endings, CORPUS) == [("steps", "LOCAL_SYNC", "b"), ("steps", "LOCAL_SYNC", "d")]


def test_steps_of_runs_that_did_not_complete_count_only_where_the_rule_says() -> None:
    endings = [
        Ending("SERVER", "FAILED", steps={"a": 1, "b": 1}),
        Ending("LOCAL_SYNC", "FAILED", steps={"a": 1}),
    ]
    assert _aspects(endings, EXACT) == [("steps", "LOCAL_SYNC", "b")]
    assert _aspects(endings, CORPUS) == [("steps", "LOCAL_SYNC", "b")]
    assert differences(endings, LIVE) == []
    completed = [Ending(e.mode, "COMPLETED", steps=e.steps) for e in endings]
    assert _aspects(completed, LIVE) == [("steps", "LOCAL_SYNC", "b")]


def test_a_step_either_run_may_run_or_not_is_left_out() -> None:
    endings = [
        Ending("SERVER", "COMPLETED", steps={"a": 1}, optional=frozenset({"b"})),
        Ending("LOCAL_SYNC", "COMPLETED", steps={"a": 1, "b": 1, "c": 3}),
        Ending("LOCAL_ASYNC", "COMPLETED", steps={"a": 1, "c": 1}, optional=frozenset({"c"})),
    ]
    assert _aspects(endings, EXACT) == [("steps", "LOCAL_SYNC", "c")]


def test_paths_count_when_a_run_records_one() -> None:
    endings = [
        Ending("SERVER", "COMPLETED", path=["a", "b"]),
        Ending("LOCAL_SYNC", "COMPLETED", path=("a", "b")),  # any sequence: the nodes count
        Ending("LOCAL_ASYNC", "COMPLETED", path=["b", "a"]),
    ]
    assert _aspects(endings, EXACT) == [("path", "LOCAL_ASYNC", "")]
    unrecorded = [Ending("SERVER", "COMPLETED"), Ending("LOCAL_SYNC", "COMPLETED")]
    assert differences(unrecorded, EXACT) == []
    one_sided = [Ending("SERVER", "COMPLETED", path=[]), Ending("LOCAL_SYNC", "COMPLETED")]
    assert _aspects(one_sided, EXACT) == [("path", "LOCAL_SYNC", "")]


def test_differences_come_in_one_order() -> None:
    endings = [
        Ending("SERVER", "COMPLETED", 1, "x", {"b": 1, "a": 1}, path=["a"]),
        Ending("LOCAL_SYNC", "FAILED", 2, "y", {}, path=["b"]),
    ]
    assert _aspects(endings, EXACT) == [
        ("status", "LOCAL_SYNC", ""),
        ("reason", "LOCAL_SYNC", ""),
        ("context", "LOCAL_SYNC", ""),
        ("path", "LOCAL_SYNC", ""),
        ("steps", "LOCAL_SYNC", "a"),
        ("steps", "LOCAL_SYNC", "b"),
    ]


FLOW = """
wiggle: 1
name: queues
queue: main
steps:
  - task: fetch
    queue: side
  - for_each: /items
    queue: joins
    steps: [{task: double, queue: inner}]
    combine: merge
  - await: approval
    apply: record
    queue: signals
"""


@pytest.mark.parametrize("mode", MODES)
def test_a_variant_runs_in_its_mode_with_its_own_version(mode: str) -> None:
    flow = load_flow(FLOW)
    variant = compiled_in_mode(flow, mode)
    assert variant.document["execution"] == mode
    assert variant.version != flow.version
    assert compiled_in_mode(variant, mode) is variant


def test_the_queues_of_flows_are_every_steps_and_default_without_any() -> None:
    # A combine's queue, a branch step's and an await's `apply` all need a worker.
    assert flow_queues([load_flow(FLOW)]) == {"side", "joins", "inner", "signals"}
    assert flow_queues([]) == {"default"}


def test_importing_the_modes_does_not_load_the_compiler() -> None:
    # `wiggle.conformance`, which the Python conformance worker imports, loads wiggle.modes.
    code = "import sys, wiggle.modes; print('wiggle.compiler' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
