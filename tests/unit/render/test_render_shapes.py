"""One shape per node kind, and the labels that name what each node does."""

from __future__ import annotations

import pytest

# Derived by hand from the design: what a reader of the diagram should see for each kind.
EXPECTED_SHAPES = {
    "work": "box",  # task
    "ok": "diamond",  # predicate (a filter here)
    "parallel-1": "trapezium",  # fork: spreading out
    "parallel-1.join": "invtrapezium",  # join: gathering in
    "for_each-1": "hexagon",
    "for_each-1.join": "invtrapezium",
    "sleep-1": "ellipse",
    "approval": "cds",
    "child": "box3d",
    "end": "doublecircle",
}


@pytest.fixture
def every_kind(g):
    return g.graph(
        "work",
        {
            "work": g.task("work", "ok"),
            "ok": g.predicate("ok", "parallel-1", None),
            "parallel-1": g.fork({"a": "left", "b": "right"}, "parallel-1.join"),
            "left": g.task("left", "parallel-1.join"),
            "right": g.task("right", "parallel-1.join"),
            "parallel-1.join": g.join("merge", "parallel-1", "for_each-1"),
            "for_each-1": g.foreach("/items", "each", "for_each-1.join"),
            "each": g.task("each", "for_each-1.join"),
            "for_each-1.join": g.join("gather", "for_each-1", "sleep-1"),
            "sleep-1": g.sleep("approval", duration_ms=30_000),
            "approval": g.await_("approval", "child"),
            "child": g.subflow("child-flow", "end"),
        },
    )


def test_each_kind_has_its_own_shape(every_kind, dot_of):
    dot = dot_of(every_kind)
    assert {node_id: dot.nodes[node_id]["shape"] for node_id in EXPECTED_SHAPES} == EXPECTED_SHAPES


def test_shapes_differ_between_kinds():
    from wiggle_render._styles import KIND_SHAPES, kind_attrs

    # A worker's kinds each have their own shape, and so has a human step (an await carrying a
    # human task); an expression node (condition, set) takes the shape of the worker kind it
    # stands beside (a decision, a step) and is told apart by its dashed outline.
    expression_kinds = {"condition": "predicate", "set": "task"}
    worker_kinds = [k for k in KIND_SHAPES if k not in expression_kinds]
    assert len({KIND_SHAPES[k] for k in worker_kinds}) == len(worker_kinds) == 10
    looks = {k: tuple(sorted(kind_attrs(k).items())) for k in KIND_SHAPES}
    assert len(set(looks.values())) == len(KIND_SHAPES) == 12
    for kind, twin in expression_kinds.items():
        assert KIND_SHAPES[kind] == KIND_SHAPES[twin]
        assert "dashed" in kind_attrs(kind)["style"]
        assert "dashed" not in kind_attrs(twin)["style"]


def test_labels_name_the_activity_or_what_the_node_waits_for(every_kind, dot_of):
    dot = dot_of(every_kind)
    expected_fragments = {
        "work": "<B>work</B>",
        "ok": "filter</FONT><BR/><B>ok?</B>",
        "parallel-1": "<B>parallel-1</B>",
        "parallel-1.join": "combine</FONT><BR/><B>merge</B>",
        "for_each-1": "for each</FONT><BR/><B>/items</B>",
        "sleep-1": "<B>30s</B>",
        "approval": "await</FONT><BR/><B>approval</B>",
        "child": "subflow</FONT><BR/><B>child-flow</B>",
        "end": "<B>end</B>",
    }
    for node_id, fragment in expected_fragments.items():
        assert fragment in dot.nodes[node_id]["label"], node_id


def test_a_start_marker_points_at_the_start_node(every_kind, dot_of):
    dot = dot_of(every_kind)
    assert dot.nodes["::start"]["shape"] == "circle"
    assert dot.edge("::start", "work") == {}


def test_sleep_until_names_the_pointer(g, dot_of):
    graph = g.graph("sleep-1", {"sleep-1": g.sleep("end", until="/window/opens_at")})
    label = dot_of(graph).nodes["sleep-1"]["label"]
    assert "sleep until" in label
    assert "<B>/window/opens_at</B>" in label


def test_the_title_carries_name_short_version_and_explicit_mode(g):
    from wiggle_render import to_dot

    graph = g.graph("end", {}, name="orders", execution="LOCAL_ASYNC")
    head = to_dot(graph).splitlines()[1]
    assert "<B>orders</B>" in head
    assert "sha256:0123456789ab…" in head
    assert "LOCAL_ASYNC" in head
    assert "DEFAULT" not in to_dot(g.graph("end", {})).splitlines()[1]


def test_a_step_whose_id_differs_from_its_activity_shows_the_id(g, dot_of):
    graph = g.graph("again", {"again": g.task("charge", "end")})
    label = dot_of(graph).nodes["again"]["label"]
    assert "<B>charge</B>" in label
    assert "id again" in label


def test_sleep_until_an_expression_shows_it(g, dot_of):
    node = g.sleep("end")
    node["until_expression"] = "timestamp(ctx.due) + duration('1h')"
    dot = dot_of(g.graph("sleep-1", {"sleep-1": node}))
    assert "sleep until" in dot.nodes["sleep-1"]["label"]
    assert "timestamp(ctx.due)" in dot.nodes["sleep-1"]["label"]
    assert dot.nodes["sleep-1"]["tooltip"] == "sleep-1: until timestamp(ctx.due) + duration('1h')"
