"""Live-instance highlighting: node id -> state (or state counts) colours and labels nodes."""

from __future__ import annotations

import pytest
from wiggle_render._styles import DIM, STATE_COLOURS, UNKNOWN_STATE_COLOUR


@pytest.fixture
def flow(g):
    return g.graph(
        "for_each-1",
        {
            "for_each-1": g.foreach("/pages", "ocr", "for_each-1.join"),
            "ocr": g.task("ocr", "for_each-1.join"),
            "for_each-1.join": g.join("gather", "for_each-1", "publish"),
            "publish": g.task("publish", "end"),
        },
    )


def test_a_state_fills_the_node_and_is_written_on_it(flow, dot_of):
    node = dot_of(flow, instance={"publish": "running"}).nodes["publish"]
    assert node["fillcolor"] == STATE_COLOURS["RUNNING"]
    assert node["penwidth"] == "2.5"
    assert node["label"].endswith('<FONT POINT-SIZE="9"><B>RUNNING</B></FONT>')


def test_counts_list_every_state_and_colour_by_the_most_pressing(flow, dot_of):
    node = dot_of(flow, instance={"ocr": {"DONE": 5, "RUNNING": 2, "READY": 0}}).nodes["ocr"]
    assert node["fillcolor"] == STATE_COLOURS["RUNNING"]
    assert "<B>RUNNING 2 · DONE 5</B>" in node["label"]


def test_nodes_without_a_state_are_faded(flow, dot_of):
    dot = dot_of(flow, instance={"ocr": "DONE"})
    assert dot.nodes["publish"]["fontcolor"] == DIM
    assert dot.nodes["publish"]["color"] == DIM
    # a pair node keeps its pair colour as its outline so the pairing still reads
    assert dot.nodes["for_each-1"]["fillcolor"] == "#ffffff"
    assert dot.nodes["for_each-1"]["color"] != DIM


def test_unknown_states_are_shown_and_unknown_nodes_ignored(flow, dot_of):
    dot = dot_of(flow, instance={"publish": "PAUSED", "not-a-node": "RUNNING"})
    assert dot.nodes["publish"]["fillcolor"] == UNKNOWN_STATE_COLOUR
    assert "<B>PAUSED</B>" in dot.nodes["publish"]["label"]
    assert "not-a-node" not in dot.nodes


def test_without_an_instance_nothing_is_faded(flow, dot_of):
    dot = dot_of(flow)
    assert all("penwidth" not in attrs for attrs in dot.nodes.values())
    assert dot.nodes["publish"].get("fontcolor") is None


def test_token_views_become_state_counts():
    from dataclasses import dataclass
    from enum import StrEnum

    from wiggle_render import states_from_tokens

    class State(StrEnum):
        RUNNING = "RUNNING"
        DONE = "DONE"

    @dataclass
    class TokenView:
        node_id: str
        state: State

    tokens = [
        TokenView("ocr", State.RUNNING),
        TokenView("ocr", State.DONE),
        TokenView("ocr", State.DONE),
        TokenView("publish", State.DONE),
    ]
    assert states_from_tokens(tokens) == {"ocr": {"RUNNING": 1, "DONE": 2}, "publish": {"DONE": 1}}
