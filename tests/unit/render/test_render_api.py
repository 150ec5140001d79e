"""The public surface of wiggle_render and its handling of formats and a missing Graphviz."""

from __future__ import annotations

import pytest
import wiggle_render
from wiggle_render import GraphvizNotFound, RenderError, format_for_path, render, to_dot

from wiggle.errors import WiggleError


def test_public_names_are_pinned():
    assert sorted(wiggle_render.__all__) == [
        "CoverageMarks",
        "FORMATS",
        "GraphvizNotFound",
        "InstanceStates",
        "RenderError",
        "STATES",
        "ensure_dot",
        "format_for_path",
        "render",
        "states_from_instance",
        "states_from_tokens",
        "to_dot",
    ]


@pytest.mark.parametrize(
    ("path", "fmt"),
    [("a.svg", "svg"), ("x/y.PNG", "png"), ("doc.pdf", "pdf"), ("g.dot", "dot"), ("g.gv", "dot")],
)
def test_the_suffix_names_the_format(path, fmt):
    assert format_for_path(path) == fmt


@pytest.mark.parametrize("path", ["a.jpg", "noext", "a.svg.bak"])
def test_an_unknown_suffix_is_a_clear_error(path):
    with pytest.raises(RenderError, match=r"use \.svg, \.png, \.pdf or \.dot"):
        format_for_path(path)


def test_errors_belong_to_the_wiggle_tree():
    assert issubclass(RenderError, WiggleError)
    assert issubclass(GraphvizNotFound, RenderError)


def test_dot_output_needs_no_graphviz(g, monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name: None)
    graph = g.graph("a", {"a": g.task("a", "end")})
    assert render(graph, "dot") == to_dot(graph).encode()


def test_a_missing_dot_says_how_to_install_it(g, monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name: None)
    graph = g.graph("a", {"a": g.task("a", "end")})
    with pytest.raises(
        GraphvizNotFound, match="Graphviz `dot` not found; install it with apt-get install graphviz"
    ):
        render(graph, "svg")


def test_an_unknown_format_is_refused(g):
    with pytest.raises(RenderError, match="unknown format 'jpg'"):
        render(g.graph("end", {}), "jpg")


def test_output_is_deterministic(g):
    graph = g.graph(
        "p",
        {
            "p": g.fork({"b": "b", "a": "a"}, "p.join"),
            "a": g.task("a", "p.join", queue="q1"),
            "b": g.task("b", "p.join", queue="q2"),
            "p.join": g.join("m", "p", "end"),
        },
    )
    assert to_dot(graph) == to_dot(graph)


def test_ids_are_quoted_safely(g):
    from wiggle_render._dotwriter import quote

    assert quote('a"b\\n') == '"a\\"b\\\\n"'
    graph = g.graph("x.y-z", {"x.y-z": g.task("x.y-z", "end")})
    assert '"x.y-z" -> "end"' in to_dot(graph)
