"""Options on the node: retry, timeout, checkpoint and friends, only where they differ from the
compiled defaults (3 attempts, exponential 1s..60s, 60s lease)."""

from __future__ import annotations

import pytest
from wiggle_render._labels import duration, options_line


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (0, "0s"),
        (250, "250ms"),
        (1000, "1s"),
        (30_000, "30s"),
        (90_000, "1m30s"),
        (300_000, "5m"),
        (7_200_000, "2h"),
        (86_400_000, "1d"),
        (259_200_000, "3d"),
        (1_500, "1s500ms"),
    ],
)
def test_durations_read_like_the_flow_format(ms, text):
    assert duration(ms) == text


def _label(g, dot_of, node):
    return dot_of(g.graph("n", {"n": node})).nodes["n"]["label"]


def test_default_options_add_no_line(g, dot_of):
    assert _label(g, dot_of, g.task("n", "end")) == "<B>n</B>"


def test_retry_timeout_and_checkpoint_on_one_line(g, dot_of):
    node = g.task(
        "n",
        "end",
        checkpoint=True,
        timeout_ms=10_000,
        retry={"max_attempts": 5, "initial_ms": 100, "max_ms": 10_000},
    )
    options = "retry 5\u00d7 exp 100ms..10s · timeout 10s · ⚑ checkpoint"
    assert _label(g, dot_of, node) == f'<B>n</B><BR/><FONT POINT-SIZE="9">{options}</FONT>'


def test_fixed_backoff_and_no_retry(g):
    from wiggle.graph import Task

    def text(**retry):
        graph = g.graph("n", {"n": g.task("n", "end", retry=retry)})
        node = graph.nodes["n"]
        assert isinstance(node, Task)
        return options_line(node)

    assert text(backoff="fixed", initial_ms=5000, max_attempts=4) == "retry 4\u00d7 every 5s"
    assert text(max_attempts=1) == "no retry"


def test_join_predicate_and_apply_options(g):
    graph = g.graph(
        "p",
        {
            "p": g.predicate("p", "w", "w", max_iterations=10, timeout_ms=5000),
            "w": g.await_("w", "f", timeout_ms=259_200_000, on_timeout="f", apply="record"),
            "f": g.foreach("/pages", "t", "f.join", max_concurrency=8),
            "t": g.task("t", "f.join"),
            "f.join": g.join("gather", "f", "end", retry={"max_attempts": 9}),
        },
    )
    assert options_line(graph.nodes["p"]) == "timeout 5s · max 10 iterations"
    assert options_line(graph.nodes["w"]) == "deadline 3d"
    assert options_line(graph.nodes["f"]) == "max 8 at once"
    assert options_line(graph.nodes["f.join"]) == "retry 9\u00d7 exp 1s..1m"


def test_await_names_its_apply_and_subflow_its_pin(g, dot_of):
    dot = dot_of(
        g.graph(
            "w",
            {
                "w": g.await_("w", "c", apply="record_kyc"),
                "c": g.subflow("child", "end", version="sha256:" + "f" * 64),
            },
        )
    )
    assert "apply record_kyc" in dot.nodes["w"]["label"]
    assert "@ sha256:ffffffffffff…" in dot.nodes["c"]["label"]


def test_label_text_is_escaped(g, dot_of):
    graph = g.graph("s", {"s": g.sleep("end", until="/a~1b<c>&d")})
    assert "<B>/a~1b&lt;c&gt;&amp;d</B>" in dot_of(graph).nodes["s"]["label"]
