"""Loops, choices and filters: back edges drawn against the flow, every decision labelled."""

from __future__ import annotations

import pytest


@pytest.fixture
def approval_loop(g):
    # register -> loop { ask -> wait(signal, 2d, on_timeout: nudge) } while more? -> archive
    return g.graph(
        "register",
        {
            "register": g.task("register", "ask"),
            "ask": g.task("ask", "decision"),
            "decision": g.await_("decision", "more", timeout_ms=172_800_000, on_timeout="nudge"),
            "nudge": g.task("nudge", "more"),
            "more": g.predicate("more", "ask", "archive", max_iterations=8),
            "archive": g.task("archive", "end"),
        },
    )


def test_the_loop_back_edge_is_dashed_and_does_not_rank(approval_loop, dot_of):
    assert dot_of(approval_loop).edge("more", "ask") == {
        "label": "true ↺",
        "style": "dashed",
        "constraint": "false",
        "color": "#555555",
    }


def test_the_loop_exit_is_labelled_false(approval_loop, dot_of):
    assert dot_of(approval_loop).edge("more", "archive") == {"label": "false"}


def test_the_loop_body_and_its_predicate_share_a_cluster(approval_loop, dot_of):
    dot = dot_of(approval_loop)
    inside = {n for n, path in dot.clusters_of.items() if path == ("cluster_loop:more",)}
    assert inside == {"ask", "decision", "nudge", "more"}
    assert dot.cluster_attrs["cluster_loop:more"]["label"] == "loop ↺"
    assert "max 8 iterations" in dot.nodes["more"]["label"]
    assert "while</FONT><BR/><B>more?</B>" in dot.nodes["more"]["label"]


def test_await_edges_name_the_signal_and_the_timeout(approval_loop, dot_of):
    dot = dot_of(approval_loop)
    assert dot.edge("decision", "more") == {"label": "signal"}
    assert dot.edge("decision", "nudge") == {
        "label": "on_timeout",
        "style": "dashed",
        "color": "#b03a2e",
        "fontcolor": "#b03a2e",
    }


def test_an_await_without_on_timeout_steps_draws_both_edges_to_next(g, dot_of):
    graph = g.graph("s", {"s": g.await_("s", "end", timeout_ms=1000, on_timeout="end")})
    labels = sorted(a["label"] for s, t, a in dot_of(graph).edges if (s, t) == ("s", "end"))
    assert labels == ["on_timeout", "signal"]


def test_choice_arms_are_labelled_true_and_false(g, dot_of):
    graph = g.graph(
        "big",
        {
            "big": g.predicate("big", "review", "small"),
            "small": g.predicate("small", "auto", "manual"),
            "review": g.task("review", "end"),
            "auto": g.task("auto", "end"),
            "manual": g.task("manual", "end"),
        },
    )
    dot = dot_of(graph)
    assert dot.edge("big", "review") == {"label": "true"}
    assert dot.edge("big", "small") == {"label": "false"}
    assert "when</FONT>" in dot.nodes["big"]["label"]
    assert dot.clusters_of["review"] == ()  # a choice is not a cluster


def test_a_filter_false_edge_ends_at_a_filtered_marker(g, dot_of):
    graph = g.graph("ok", {"ok": g.predicate("ok", "end", None)})
    dot = dot_of(graph)
    assert dot.nodes["ok::filtered"] == {
        "shape": "plaintext",
        "label": "filtered",
        "fontcolor": "#a0a0a0",
        "fontsize": "9",
    }
    assert dot.edge("ok", "ok::filtered") == {
        "label": "false",
        "style": "dashed",
        "color": "#a0a0a0",
        "fontcolor": "#a0a0a0",
    }


def test_a_loop_that_is_a_whole_branch_nests_inside_the_branch(g, dot_of):
    graph = g.graph(
        "parallel-1",
        {
            "parallel-1": g.fork({"poll": "check"}, "parallel-1.join"),
            "check": g.task("check", "again"),
            "again": g.predicate("again", "check", "parallel-1.join", max_iterations=5),
            "parallel-1.join": g.join("merge", "parallel-1", "end"),
        },
    )
    dot = dot_of(graph)
    assert dot.clusters_of["check"] == (
        "cluster_fork:parallel-1",
        "cluster_branch:parallel-1:poll",
        "cluster_loop:again",
    )
