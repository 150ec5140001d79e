"""Expression nodes on the diagram: a condition is a dashed decision whose expression labels the
edge it decides, a set is a dashed step listing its assignments, and hovering shows them whole."""

from __future__ import annotations


def test_a_condition_labels_its_true_edge_with_the_expression(g, dot_of):
    graph = g.graph(
        "if-1",
        {
            "if-1": g.condition("ctx.amount >= 1000", "big", "small"),
            "big": g.task("big", "end"),
            "small": g.task("small", "end"),
        },
    )
    dot = dot_of(graph)
    node = dot.nodes["if-1"]
    assert node["shape"] == "diamond"
    assert "dashed" in node["style"]
    assert "if</FONT><BR/><B>if-1</B>" in node["label"]
    assert dot.edge("if-1", "big")["label"] == "ctx.amount >= 1000"
    assert dot.edge("if-1", "small")["label"] == "false"
    assert node["tooltip"] == "if-1: ctx.amount >= 1000"


def test_a_long_expression_is_shortened_on_the_edge_and_whole_in_the_tooltip(g, dot_of):
    long = "size(ctx.items.filter(i, i.price > 100 && i.region == 'eu')) > 0"
    graph = g.graph("filter-1", {"filter-1": g.condition(long, "end", None)})
    dot = dot_of(graph)
    label = dot.edge("filter-1", "end")["label"]
    assert label.endswith("…") and len(label) < len(long)
    assert "filter</FONT><BR/><B>filter-1</B>" in dot.nodes["filter-1"]["label"]
    assert "i.region == 'eu'" in dot.nodes["filter-1"]["tooltip"]
    # A filter's false edge ends the token, drawn to the filtered marker.
    assert any(s == "filter-1" and "filtered" in t for s, t, _ in dot.edges)


def test_a_while_condition_draws_a_loop_around_its_body(g, dot_of):
    graph = g.graph(
        "inc",
        {
            "inc": g.task("inc", "while-1"),
            "while-1": g.condition("ctx.n < 3", "inc", "end", max_iterations=4),
        },
    )
    dot = dot_of(graph)
    assert "max 4 iterations" in dot.nodes["while-1"]["label"]
    assert "while</FONT>" in dot.nodes["while-1"]["label"]
    assert dot.edge("while-1", "inc")["label"] == "ctx.n < 3 ↺"
    assert dot.cluster("inc") == dot.cluster("while-1") is not None


def test_a_set_lists_its_assignments(g, dot_of):
    graph = g.graph(
        "set-1",
        {"set-1": g.set_values({"total": "ctx.a + ctx.b", "seen": "true"}, "end")},
    )
    node = dot_of(graph).nodes["set-1"]
    assert node["shape"] == "box"
    assert "dashed" in node["style"]
    assert "<B>total, seen</B>" in node["label"]
    assert "total = ctx.a + ctx.b" in node["label"]
    assert "seen = true" in node["tooltip"]
