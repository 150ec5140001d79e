"""Coverage marks: edges no scenario took are red, dashed and labelled; unreached nodes fade."""

from __future__ import annotations

import pytest
from wiggle_render import CoverageMarks
from wiggle_render._styles import DIM, UNTAKEN_COLOUR

from wiggle.graph import out_edges


@pytest.fixture
def flow(g):
    return g.graph(
        "check",
        {
            "check": g.predicate("check", "approve", "reject"),
            "approve": g.task("approve", "end"),
            "reject": g.task("reject", "end"),
        },
    )


def _keys(flow, *sources):
    return frozenset(e.key for s in sources for e in out_edges(flow.nodes[s]))


def test_untaken_edges_are_marked_and_taken_ones_are_not(flow, dot_of):
    taken = frozenset({"check -true-> approve", "approve -next-> end"})
    marks = CoverageMarks(taken, frozenset({"check", "approve", "end"}))
    dot = dot_of(flow, coverage=marks)
    untaken = dot.edge("check", "reject")
    assert untaken["color"] == UNTAKEN_COLOUR and untaken["style"] == "dashed"
    assert untaken["label"] == "false · untaken"
    assert dot.edge("reject", "end")["label"] == "untaken"
    assert dot.edge("check", "approve").get("color") != UNTAKEN_COLOUR
    assert "untaken" not in dot.edge("approve", "end").get("label", "")


def test_unreached_nodes_fade_and_reached_ones_do_not(flow, dot_of):
    marks = CoverageMarks(_keys(flow, "check", "approve"), frozenset({"check", "approve"}))
    dot = dot_of(flow, coverage=marks)
    assert dot.nodes["reject"]["fontcolor"] == DIM
    assert dot.nodes["approve"].get("fontcolor") != DIM
    assert dot.nodes["end"].get("fontcolor") != DIM  # the end is never marked


def test_full_coverage_marks_nothing(flow, dot_of):
    marks = CoverageMarks(_keys(flow, *flow.nodes), frozenset(flow.nodes))
    assert dot_of(flow, coverage=marks).edges == dot_of(flow).edges


def test_the_edge_keys_the_diagram_uses_are_the_graphs(flow):
    from wiggle_render._layout import analyse

    assert {e.key for e in analyse(flow).edges} == _keys(flow, *flow.nodes)
