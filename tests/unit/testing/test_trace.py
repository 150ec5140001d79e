"""The path and the edges of an instance, read from its events and its graph (no engine)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from wiggle.compiler import load_flow
from wiggle.testing._trace import trace


@dataclass(frozen=True)
class Ev:
    kind: str
    node_id: str = ""
    attempt: int = 0
    detail: Any = field(default_factory=dict)


START = Ev("instance_started")


def done(node: str, **detail: Any) -> Ev:
    return Ev("step_completed", node, 1, detail)


def graph(steps: str):
    return load_flow(f"wiggle: 1\nname: t\nsteps:\n{steps}").graph


def test_a_choice_records_the_arm_taken_and_the_path_skips_the_other():
    g = graph(
        "  - choice:\n      - when: big\n        steps: [{task: review}]\n"
        "    otherwise: [{task: approve}]\n  - task: archive\n"
    )
    t = trace(g, [START, done("big", predicate=False), done("approve"), done("archive")])
    assert t.path == ["big", "approve", "archive"]
    assert t.edges == {
        "big -false-> approve": 1,
        "approve -next-> archive": 1,
        "archive -next-> end": 1,
    }
    assert "review" not in t.visited and "end" in t.visited


def test_a_fork_is_passed_and_every_branch_edge_taken():
    g = graph(
        "  - task: a\n  - parallel:\n      x: [{task: x1}]\n      y: [{task: y1}]\n"
        "    combine: merge\n"
    )
    events = [START, done("a"), done("x1"), done("y1"), done("parallel-1.join")]
    t = trace(g, events)
    assert t.path == ["a", "parallel-1", "x1", "y1", "parallel-1.join"]
    assert t.edges["parallel-1 -branch:x-> x1"] == 1
    assert t.edges["parallel-1 -branch:y-> y1"] == 1


def test_a_sleep_that_waited_is_passed_when_its_timer_fires():
    g = graph("  - task: a\n  - sleep: 1h\n  - task: b\n")
    events = [START, done("a"), Ev("timer_fired", "sleep-1", 0, {"timer": "sleep"}), done("b")]
    assert trace(g, events).path == ["a", "sleep-1", "b"]


def test_a_sleep_whose_instant_is_past_leaves_no_event_but_is_in_the_path():
    g = graph("  - task: a\n  - sleep: {until: /at}\n  - task: b\n")
    t = trace(g, [START, done("a"), done("b")])
    assert t.path == ["a", "sleep-1", "b"]
    assert t.edges["sleep-1 -next-> b"] == 1


def test_a_sleep_right_before_the_end_is_passed_when_the_instance_completes():
    g = graph("  - task: a\n  - sleep: {until: /at}\n")
    t = trace(g, [START, done("a"), Ev("instance_completed", "", 0, {"reason": ""})])
    assert t.path == ["a", "sleep-1"]
    assert t.edges["sleep-1 -next-> end"] == 1


def test_an_await_by_signal_or_by_timeout():
    g = graph(
        "  - await: s\n    timeout: 3d\n    apply: take\n    on_timeout: [{task: escalate}]\n"
        "  - task: after\n"
    )
    by_signal = trace(g, [START, Ev("signal_consumed", "s", 0, {"signal": "s"}), done("s")])
    assert by_signal.path == ["s"]
    assert by_signal.edges == {"s -signal-> after": 1}
    timeout = Ev("timer_fired", "s", 0, {"timer": "await_timeout"})
    late = trace(g, [START, timeout, done("escalate"), done("after")])
    assert late.path == ["s", "escalate", "after"]
    assert late.edges["s -on_timeout-> escalate"] == 1


def test_a_filter_false_ends_the_token():
    g = graph("  - filter: ok\n  - task: a\n")
    t = trace(g, [START, done("ok", predicate=False)])
    assert t.path == ["ok"] and t.edges == {"ok -filtered-> (filtered)": 1}


def test_a_loop_goes_back_then_exits_and_a_runaway_loop_is_an_outcome_not_an_edge():
    g = graph(
        "  - loop:\n      steps: [{task: work}]\n      while: again\n      max_iterations: 2\n"
    )
    ok = trace(g, [START, done("work"), done("again", predicate=True), done("work")])
    assert ok.edges["again -back-> work"] == 1
    out = trace(g, [START, done("work"), done("again", predicate=False)])
    assert out.edges["again -false-> end"] == 1
    failed = Ev("instance_failed", "", 0, {"reason": "loop 'again' exceeded max_iterations 2"})
    runaway = trace(g, [START, done("work"), done("again", predicate=True), failed])
    assert "again -back-> work" not in runaway.edges
    assert runaway.outcomes == {("again", "loop_limit"): 1}


def test_retries_are_outcomes_and_a_step_that_failed_for_good_ends_the_path():
    g = graph("  - task: a\n    retry: {max_attempts: 2}\n  - task: b\n")
    events = [
        START,
        Ev("step_failed", "a", 1, {"non_retryable": False}),
        Ev("step_retried", "a", 2, {"delay_ms": 1000}),
        Ev("step_failed", "a", 2, {"non_retryable": False}),
    ]
    t = trace(g, events)
    assert t.outcomes == {("a", "retried"): 1, ("a", "exhausted"): 1}
    assert t.path == ["a"] and t.edges == {}
    final = trace(g, [START, Ev("step_failed", "a", 1, {"non_retryable": True})])
    assert final.outcomes == {("a", "failed"): 1}


def test_a_foreach_body_edge_is_taken_once_an_element_runs():
    g = graph("  - for_each: /xs\n    steps: [{task: each}]\n    combine: gather\n")
    empty = trace(g, [START, done("for_each-1.join")])
    assert empty.path == ["for_each-1", "for_each-1.join"]
    assert "for_each-1 -body-> each" not in empty.edges
    full = trace(g, [START, done("each"), done("each"), done("for_each-1.join")])
    assert full.edges["for_each-1 -body-> each"] == 1
    assert full.path == ["for_each-1", "each", "each", "for_each-1.join"]


def test_a_subflow_is_passed_when_its_child_finishes():
    g = graph("  - subflow: child\n  - task: after\n")
    finished = Ev("child_finished", "child", 0, {"status": "COMPLETED"})
    t = trace(g, [START, Ev("child_started", "child"), finished, done("after")])
    assert t.path == ["child", "after"] and t.edges["child -next-> after"] == 1


def test_expression_nodes_take_the_edge_their_value_names():
    g = graph(
        '  - set: {total: "ctx.n * 2"}\n'
        '  - choice:\n      - if: "ctx.total > 10"\n        steps: [{task: review}]\n'
        "    otherwise: [{task: approve}]\n"
        '  - filter: {if: "ctx.total > 0"}\n'
    )
    events = [
        START,
        done("set-1", values={"total": 4}),
        done("if-1", predicate=False),
        done("approve"),
        done("filter-1", predicate=True),
    ]
    t = trace(g, events)
    assert t.path == ["set-1", "if-1", "approve", "filter-1"]
    assert t.edges == {
        "set-1 -next-> if-1": 1,
        "if-1 -false-> approve": 1,
        "approve -next-> filter-1": 1,
        "filter-1 -true-> end": 1,
    }
    assert "review" not in t.visited


def test_a_while_expression_at_its_limit_counts_a_loop_limit():
    g = graph(
        '  - loop:\n      steps: [{task: inc}]\n      while: {if: "ctx.n < 9"}\n'
        "      max_iterations: 2\n"
    )
    failed = Ev("instance_failed", "", 0, {"reason": "loop 'while-1' exceeded max_iterations 2"})
    events = [
        START,
        done("inc"),
        done("while-1", predicate=True),
        done("inc"),
        done("while-1", predicate=True),
        failed,
    ]
    t = trace(g, events)
    assert t.edges["while-1 -back-> inc"] == 1
    assert t.outcomes[("while-1", "loop_limit")] == 1
