"""A human step on the diagram: an await carrying a human task is drawn as a folder (a card in
an inbox), labelled with the task's title and who may take it, and the real `dot` draws it."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from wiggle_render import GraphvizNotFound, ensure_dot, render
from wiggle_render._styles import KIND_SHAPES

SVG = "{http://www.w3.org/2000/svg}"


def human_node(next, title="Approve invoice", timeout_ms=None, on_timeout=None, **task):
    return {
        "kind": "await",
        "signal": "task:approve",
        "timeout_ms": timeout_ms,
        "on_timeout": on_timeout,
        "apply": None,
        "next": next,
        "human": {
            "title": title,
            "instructions": None,
            "form": {"type": "object"},
            "assignee": "alice",
            "candidates": {"people": [], "groups": []},
            "due_ms": None,
            "remind_ms": [],
            "exclude": [],
            "approvals": 1,
            "into": None,
            **task,
        },
    }


@pytest.fixture
def approval(g):
    return g.graph(
        "prepare",
        {
            "prepare": g.task("prepare", "approve"),
            "approve": human_node(
                "book",
                timeout_ms=3 * 86_400_000,
                on_timeout="escalate",
                candidates={"people": ["bob", {"expr": "ctx.deputy"}], "groups": ["finance"]},
                due_ms=2 * 86_400_000,
                remind_ms=[43_200_000, 86_400_000],
                exclude=["last_actor", "starter"],
                approvals=2,
                into="decision",
            ),
            "escalate": g.task("escalate", "book"),
            "kyc": g.await_("kyc", "end"),
            "book": g.task("book", "kyc"),
        },
    )


def test_a_human_step_has_its_own_shape_beside_a_plain_await(approval, dot_of):
    dot = dot_of(approval)
    assert dot.nodes["approve"]["shape"] == "folder"
    assert dot.nodes["kyc"]["shape"] == "cds"
    assert dot.nodes["approve"]["fillcolor"] != dot.nodes["kyc"]["fillcolor"]
    assert "folder" not in {shape for kind, shape in KIND_SHAPES.items() if kind != "human"}


def test_the_label_shows_the_title_who_and_the_tasks_rules(approval, dot_of):
    label = dot_of(approval).nodes["approve"]["label"]
    assert "human task</FONT><BR/><B>Approve invoice</B>" in label
    assert "id approve" in label
    assert "for alice · bob, = ctx.deputy, group finance" in label
    assert "answer into decision" in label
    assert "deadline 3d · due 2d · remind 12h, 1d · 2 approvals · not last actor, starter" in label


def test_the_answer_edge_and_the_escalation(approval, dot_of):
    dot = dot_of(approval)
    assert dot.edge("approve", "book")["label"] == "answered"
    timeout = dot.edge("approve", "escalate")
    assert (timeout["label"], timeout["style"]) == ("on_timeout", "dashed")
    assert dot.edge("kyc", "end")["label"] == "signal"  # a plain await keeps its word


def test_a_computed_title_names_the_step_and_shows_the_expression(g, dot_of):
    graph = g.graph("approve", {"approve": human_node("end", title={"expr": "'Pay ' + ctx.who"})})
    node = dot_of(graph).nodes["approve"]
    assert "human task</FONT><BR/><B>approve</B>" in node["label"]
    assert "title = 'Pay ' + ctx.who" in node["label"]
    assert node["tooltip"].startswith("approve: human task, answered by the signal task:approve")
    assert "title: = 'Pay ' + ctx.who" in node["tooltip"]


def test_the_real_dot_draws_it(approval):
    try:
        ensure_dot()
    except GraphvizNotFound as exc:  # fail, never skip: a skipped drawing would hide a break
        pytest.fail(str(exc), pytrace=False)
    root = ET.fromstring(render(approval, "svg"))
    nodes = {
        g.find(f"{SVG}title").text: g for g in root.iter(f"{SVG}g") if g.get("class") == "node"
    }
    assert set(approval.nodes) <= set(nodes)
    texts = {"".join(t.itertext()).strip() for t in nodes["approve"].iter(f"{SVG}text")}
    assert "Approve invoice" in texts
    assert "answer into decision" in texts
    # Graphviz draws a folder as one polygon with its tab's corners: more points than a box's.
    (outline,) = nodes["approve"].iter(f"{SVG}polygon")
    assert len(outline.get("points").split()) > 5
    assert render(approval, "png")[:8] == b"\x89PNG\r\n\x1a\n"
