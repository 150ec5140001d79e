"""wiggle.overlay: what an instance's tokens and events say about each node of its graph.

Tokens and events are written here as the engine leaves them (the integration test
tests/integration/server/test_overlay_differential.py runs real instances); each test is one
rule of the module docstring.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from wiggle.compiler import load_flow
from wiggle.graph import Graph
from wiggle.overlay import failed_node, node_states


@dataclass(frozen=True)
class Tok:
    node_id: str
    state: str
    token_id: str = ""
    parent_token_id: str = ""


@dataclass(frozen=True)
class Ev:
    kind: str
    node_id: str = ""
    detail: Any = None


def graph(text: str) -> Graph:
    return load_flow("wiggle: 1\nname: f\n" + text).graph


def done(*node_ids: str) -> list[Ev]:
    return [Ev("step_completed", n) for n in node_ids]


ORDER = graph(
    """steps:
  - task: validate
  - parallel:
      payment: [{task: authorise}]
      shipping: [{task: reserve_stock}]
    combine: merge
  - task: notify
"""
)


def test_a_failed_step_is_failed_and_the_branches_it_cut_off_are_cancelled():
    tokens = [
        Tok("parallel-1", "DONE", "p"),
        Tok("authorise", "DONE", "a", "p"),
        Tok("reserve_stock", "DONE", "r", "p"),
    ]
    events = [
        *done("validate"),
        Ev("step_started", "authorise"),
        Ev("step_failed", "authorise", {"message": "declined"}),
    ]
    states = node_states(ORDER, "FAILED", "step 'authorise' failed: card declined", tokens, events)
    assert states == {
        "validate": {"DONE": 1},
        "authorise": {"FAILED": 1},
        "reserve_stock": {"CANCELLED": 1},
        "parallel-1": {"CANCELLED": 1},
    }


def test_live_tokens_count_in_their_state_and_leased_ones_are_running():
    tokens = [
        Tok("parallel-1", "JOINED", "p"),
        Tok("authorise", "LEASED", "a", "p"),
        Tok("parallel-1.join", "JOINED", "r", "p"),
    ]
    events = done("validate", "reserve_stock")
    states = node_states(ORDER, "RUNNING", "", tokens, events)
    assert states == {
        "validate": {"DONE": 1},
        "parallel-1": {"JOINED": 1},
        "authorise": {"RUNNING": 1},
        "reserve_stock": {"DONE": 1},
        "parallel-1.join": {"JOINED": 1},
    }


def test_arrived_branches_are_not_counted_again_and_the_combine_passes_the_fork():
    tokens = [
        Tok("end", "DONE", "p"),
        Tok("parallel-1.join", "DONE", "a", "p"),
        Tok("parallel-1.join", "DONE", "r", "p"),
    ]
    events = done("validate", "authorise", "reserve_stock", "parallel-1.join", "notify")
    states = node_states(ORDER, "COMPLETED", "", tokens, events)
    assert states == {
        "validate": {"DONE": 1},
        "parallel-1": {"DONE": 1},
        "authorise": {"DONE": 1},
        "reserve_stock": {"DONE": 1},
        "parallel-1.join": {"DONE": 1},
        "notify": {"DONE": 1},
        "end": {"DONE": 1},
    }


def test_a_combine_under_way_or_cut_off_is_told_from_the_arrivals():
    arrivals = [Tok("parallel-1.join", "DONE", b, "p") for b in ("a", "r")]
    events = done("validate", "authorise", "reserve_stock")
    running = node_states(
        ORDER, "RUNNING", "", [Tok("parallel-1.join", "READY", "p"), *arrivals], events
    )
    assert running["parallel-1.join"] == {"READY": 1}
    assert running["parallel-1"] == {"DONE": 1}
    cancelled = node_states(
        ORDER, "CANCELLED", "cancelled", [Tok("parallel-1.join", "DONE", "p"), *arrivals], events
    )
    assert cancelled["parallel-1.join"] == {"CANCELLED": 1}
    assert cancelled["parallel-1"] == {"DONE": 1}


PAGES = graph(
    """steps:
  - for_each: /pages
    max_concurrency: 2
    steps:
      - task: ocr
      - filter: has_text
      - task: classify
    combine: assemble
"""
)


def test_a_filtered_branch_leaves_no_extra_count_where_its_token_stopped():
    # In a LOCAL mode the filtered branch's token stays where its run began (ocr).
    tokens = [
        Tok("end", "DONE", "p"),
        Tok("for_each-1.join", "DONE", "b0", "p"),
        Tok("ocr", "DONE", "b1", "p"),
        Tok("for_each-1.join", "DONE", "b2", "p"),
    ]
    events = [
        *done("ocr", "has_text", "classify"),
        *done("ocr", "has_text"),
        Ev("branch_filtered", "ocr", {"branch": "1"}),
        *done("ocr", "has_text", "classify", "for_each-1.join"),
    ]
    states = node_states(PAGES, "COMPLETED", "", tokens, events)
    assert states == {
        "for_each-1": {"DONE": 1},
        "ocr": {"DONE": 3},
        "has_text": {"DONE": 3},
        "classify": {"DONE": 2},
        "for_each-1.join": {"DONE": 1},
        "end": {"DONE": 1},
    }


def test_held_elements_wait_and_are_cancelled_with_the_instance():
    tokens = [
        Tok("for_each-1", "JOINED", "p"),
        Tok("ocr", "LEASED", "b0", "p"),
        Tok("ocr", "READY", "b1", "p"),
        Tok("ocr", "WAITING", "b2", "p"),
        Tok("ocr", "WAITING", "b3", "p"),
    ]
    assert node_states(PAGES, "RUNNING", "", tokens, []) == {
        "for_each-1": {"JOINED": 1},
        "ocr": {"RUNNING": 1, "READY": 1, "WAITING": 2},
    }
    ended = [Tok(t.node_id, "DONE", t.token_id, t.parent_token_id) for t in tokens]
    assert node_states(PAGES, "CANCELLED", "cancelled", ended, []) == {
        "for_each-1": {"CANCELLED": 1},
        "ocr": {"CANCELLED": 4},
    }


def test_a_filtered_instance_completes_without_a_cancelled_node():
    flow = graph("steps:\n  - filter: keep\n  - task: act\n")
    states = node_states(flow, "COMPLETED", "filtered", [Tok("keep", "DONE", "t")], done("keep"))
    assert states == {"keep": {"DONE": 1}}


NIGHTLY = graph(
    """steps:
  - task: plan
  - sleep: {until: /opens_at}
  - task: snapshot
  - for_each: /accounts
    steps:
      - subflow: item
    combine: summarise
  - sleep: 1m
  - task: publish
"""
)


def test_sleeps_subflows_and_for_each_an_instance_went_past_are_done():
    tokens = [Tok("end", "DONE", "p")] + [
        Tok("for_each-1.join", "DONE", f"b{i}", "p") for i in range(3)
    ]
    events = [
        *done("plan"),  # the window had opened: the first sleep fired no timer
        *done("snapshot"),
        *[Ev("child_started", "item") for _ in range(3)],
        *[Ev("child_finished", "item", {"status": "COMPLETED"}) for _ in range(3)],
        *done("for_each-1.join"),
        Ev("timer_fired", "sleep-2", {"timer": "sleep"}),
        *done("publish"),
    ]
    states = node_states(NIGHTLY, "COMPLETED", "", tokens, events)
    assert states == {
        "plan": {"DONE": 1},
        "sleep-1": {"DONE": 1},
        "snapshot": {"DONE": 1},
        "for_each-1": {"DONE": 1},
        "item": {"DONE": 3},
        "for_each-1.join": {"DONE": 1},
        "sleep-2": {"DONE": 1},
        "publish": {"DONE": 1},
        "end": {"DONE": 1},
    }


def test_a_sleeping_subflow_and_a_child_failure():
    tokens = [Tok("for_each-1", "JOINED", "p"), Tok("item", "WAITING", "b0", "p")]
    running = node_states(NIGHTLY, "RUNNING", "", tokens, done("plan", "snapshot"))
    assert running["item"] == {"WAITING": 1} and running["sleep-1"] == {"DONE": 1}
    ended = [Tok("for_each-1", "DONE", "p"), Tok("item", "DONE", "b0", "p")]
    reason = "subflow 'item': child instance c1 (item) is FAILED: step 'x' failed: no"
    failed = node_states(NIGHTLY, "FAILED", reason, ended, done("plan", "snapshot"))
    assert failed["item"] == {"FAILED": 1} and failed["for_each-1"] == {"CANCELLED": 1}


APPROVAL = graph(
    """steps:
  - loop:
      steps:
        - task: ask
      while: again
      max_iterations: 5
  - await: approve
    timeout: 1h
    on_timeout:
      - task: escalate
  - await: confirm
    apply: record
"""
)


def test_loop_iterations_awaits_by_signal_timeout_and_apply_step():
    loops = done("ask", "again", "ask", "again", "ask", "again")
    timed_out = [*loops, Ev("timer_fired", "approve", {"timer": "await_timeout"})]
    states = node_states(APPROVAL, "RUNNING", "", [Tok("escalate", "READY", "t")], timed_out)
    assert states == {
        "ask": {"DONE": 3},
        "again": {"DONE": 3},
        "approve": {"DONE": 1},
        "escalate": {"READY": 1},
    }
    by_signal = [*loops, Ev("signal_consumed", "approve"), Ev("signal_consumed", "confirm")]
    states = node_states(APPROVAL, "RUNNING", "", [Tok("confirm", "LEASED", "t")], by_signal)
    assert states["approve"] == {"DONE": 1}
    assert states["confirm"] == {"RUNNING": 1}  # the apply step runs; not yet past
    states = node_states(
        APPROVAL, "COMPLETED", "", [Tok("end", "DONE", "t")], [*by_signal, *done("confirm")]
    )
    assert states["confirm"] == {"DONE": 1} and states["end"] == {"DONE": 1}


def test_a_retrying_step_waits_and_a_loop_limit_fails_at_its_predicate():
    retrying = [Ev("step_failed", "ask"), Ev("step_retried", "ask")]
    states = node_states(APPROVAL, "RUNNING", "", [Tok("ask", "WAITING", "t")], retrying)
    assert states == {"ask": {"WAITING": 1}}
    reason = "loop 'again' exceeded max_iterations 5"
    states = node_states(
        APPROVAL, "FAILED", reason, [Tok("again", "DONE", "t")], done(*["ask", "again"] * 5)
    )
    assert states == {"ask": {"DONE": 5}, "again": {"DONE": 5, "FAILED": 1}}


def test_the_failed_node_is_read_from_every_reason_the_engine_writes():
    assert failed_node("step 'authorise' failed after 5 attempt(s): declined") == "authorise"
    assert failed_node("sleep 'sleep-1': /at is missing from the context") == "sleep-1"
    assert failed_node("for_each 'for_each-1': /pages is a string") == "for_each-1"
    assert failed_node("subflow 'item': flow 'x' is not registered") == "item"
    assert failed_node("loop 'again' exceeded max_iterations 5") == "again"
    assert failed_node("cancelled: by ops") == ""
    assert failed_node("step 'a.b-c_1' failed: x") == "a.b-c_1"


def test_expression_nodes_count_their_evaluations_and_a_failing_one_is_where_it_failed():
    flow = graph(
        """steps:
  - set: {total: "ctx.n * 2"}
  - loop:
      steps: [{task: inc}]
      while: {if: "ctx.n < ctx.total"}
      max_iterations: 9
  - filter: {if: "ctx.total > 0"}
"""
    )
    events = done("set-1", "inc", "while-1", "inc", "while-1", "filter-1")
    states = node_states(flow, "COMPLETED", "", [Tok("end", "DONE", "t")], events)
    assert states == {
        "set-1": {"DONE": 1},
        "inc": {"DONE": 2},
        "while-1": {"DONE": 2},
        "filter-1": {"DONE": 1},
        "end": {"DONE": 1},
    }
    failing = [*done("set-1", "inc"), Ev("step_failed", "while-1")]
    reason = "step 'while-1' failed: no_such_field: 'total' (expression 'ctx.n < ctx.total')"
    states = node_states(flow, "FAILED", reason, [Tok("while-1", "DONE", "t")], failing)
    assert states["while-1"] == {"FAILED": 1}
    assert states["set-1"] == {"DONE": 1} and states["inc"] == {"DONE": 1}
