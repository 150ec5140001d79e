"""Fork/join and foreach/join pairs: one colour per pair, one cluster around each pair."""

from __future__ import annotations

import pytest
from wiggle_render._styles import PAIR_COLOURS

BLUE, RED = PAIR_COLOURS[0], PAIR_COLOURS[1]


@pytest.fixture
def nested(g):
    # parallel-1 { a: [a1, parallel-2 { x: [x1], y: [y1] } ], b: [b1] } then for_each-1 { e1 }
    return g.graph(
        "parallel-1",
        {
            "parallel-1": g.fork({"a": "a1", "b": "b1"}, "parallel-1.join"),
            "a1": g.task("a1", "parallel-2"),
            "parallel-2": g.fork({"x": "x1", "y": "y1"}, "parallel-2.join"),
            "x1": g.task("x1", "parallel-2.join"),
            "y1": g.task("y1", "parallel-2.join"),
            "parallel-2.join": g.join("inner", "parallel-2", "parallel-1.join"),
            "b1": g.task("b1", "parallel-1.join"),
            "parallel-1.join": g.join("outer", "parallel-1", "for_each-1"),
            "for_each-1": g.foreach("/items", "e1", "for_each-1.join", max_concurrency=3),
            "e1": g.task("e1", "for_each-1.join"),
            "for_each-1.join": g.join("gather", "for_each-1", "end"),
        },
    )


def test_fork_and_join_share_a_colour_and_pairs_differ(nested, dot_of):
    dot = dot_of(nested)
    colour = {n: dot.nodes[n]["fillcolor"] for n in dot.nodes if n.startswith(("par", "for"))}
    assert colour == {
        "parallel-1": BLUE,
        "parallel-1.join": BLUE,
        "parallel-2": RED,
        "parallel-2.join": RED,
        "for_each-1": PAIR_COLOURS[2],
        "for_each-1.join": PAIR_COLOURS[2],
    }


def test_branch_edges_are_named_and_coloured_like_their_fork(nested, dot_of):
    dot = dot_of(nested)
    assert dot.edge("parallel-1", "a1") == {
        "label": "a",
        "color": BLUE,
        "fontcolor": BLUE,
        "penwidth": "1.5",
    }
    assert dot.edge("parallel-1", "b1")["label"] == "b"
    assert dot.edge("parallel-2", "y1")["color"] == RED
    assert dot.edge("for_each-1", "e1")["label"] == "body"
    # the edges closing a branch take the pair's colour too
    assert dot.edge("b1", "parallel-1.join") == {"color": BLUE}
    assert dot.edge("x1", "parallel-2.join") == {"color": RED}


def test_the_join_edge_of_a_fork_is_not_drawn(nested, dot_of):
    dot = dot_of(nested)
    assert [(s, t) for s, t, _ in dot.edges if s == "parallel-1"] == [
        ("parallel-1", "a1"),
        ("parallel-1", "b1"),
    ]


def test_clusters_nest_fork_regions_and_branches(nested, dot_of):
    dot = dot_of(nested)
    outer, a, b = (
        "cluster_fork:parallel-1",
        "cluster_branch:parallel-1:a",
        "cluster_branch:parallel-1:b",
    )
    inner = "cluster_fork:parallel-2"
    assert dot.clusters_of["parallel-1"] == (outer,)
    assert dot.clusters_of["parallel-1.join"] == (outer,)
    assert dot.clusters_of["a1"] == (outer, a)
    assert dot.clusters_of["b1"] == (outer, b)
    assert dot.clusters_of["parallel-2"] == (outer, a, inner)
    assert dot.clusters_of["x1"] == (outer, a, inner, "cluster_branch:parallel-2:x")
    assert dot.clusters_of["for_each-1"] == ("cluster_foreach:for_each-1",)
    assert dot.clusters_of["e1"] == ("cluster_foreach:for_each-1",)
    assert dot.clusters_of["end"] == ()


def test_region_clusters_are_drawn_in_the_pair_colour(nested, dot_of):
    dot = dot_of(nested)
    assert dot.cluster_attrs["cluster_fork:parallel-1"]["color"] == BLUE
    assert dot.cluster_attrs["cluster_branch:parallel-2:x"] == {
        "label": "",
        "style": "dashed,rounded",
        "color": RED,
    }


def test_a_fork_after_a_for_each_takes_the_next_colour(g, dot_of):
    graph = g.graph(
        "for_each-1",
        {
            "for_each-1": g.foreach("/items", "e1", "for_each-1.join"),
            "e1": g.task("e1", "for_each-1.join"),
            "for_each-1.join": g.join("gather", "for_each-1", "parallel-1"),
            "parallel-1": g.fork({"only": "o1"}, "parallel-1.join"),
            "o1": g.task("o1", "parallel-1.join"),
            "parallel-1.join": g.join("merge", "parallel-1", "end"),
        },
    )
    dot = dot_of(graph)
    assert dot.nodes["for_each-1.join"]["color"] == BLUE
    assert dot.nodes["parallel-1.join"]["color"] == RED


def test_a_hand_written_graph_that_is_not_well_nested_still_draws(g, dot_of):
    # branch b skips the join and runs to the end: no cluster can honestly hold the pair
    graph = g.graph(
        "p",
        {
            "p": g.fork({"a": "a", "b": "b"}, "p.join"),
            "a": g.task("a", "p.join"),
            "b": g.task("b", "end"),
            "p.join": g.join("merge", "p", "end"),
            "stray": g.task("stray", "end"),  # unreachable, but drawn
        },
    )
    dot = dot_of(graph)
    assert dot.cluster_attrs == {}
    assert {"p", "a", "b", "p.join", "stray", "end"} <= set(dot.nodes)
    assert dot.nodes["p"]["fillcolor"] == dot.nodes["p.join"]["fillcolor"] == BLUE
