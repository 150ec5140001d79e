"""Runs spec/conformance/traversal/ against wiggle.traversal: the same vectors every worker runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from wiggle.graph import Graph
from wiggle.traversal import Handback, advance, lease_budget_left, successor

VECTORS = Path(__file__).resolve().parents[2] / "spec" / "conformance" / "traversal"
GRAPH_FILES = sorted(p for p in VECTORS.glob("*.json") if p.name != "lease_budget.json")


def _cases() -> list[Any]:
    params = []
    for path in GRAPH_FILES:
        doc = json.loads(path.read_text())
        graph = Graph.from_json(doc["graph"], version="sha256:" + "0" * 64)
        for case in doc["cases"]:
            params.append(pytest.param(graph, case, id=f"{path.stem}: {case['description']}"))
    return params


def test_the_corpus_is_not_empty() -> None:
    assert len(GRAPH_FILES) >= 4
    assert len(_cases()) >= 25


@pytest.mark.parametrize(("graph", "case"), _cases())
def test_vector(graph: Graph, case: dict[str, Any]) -> None:
    move = advance(
        graph,
        case["node"],
        case["worker_queues"],
        predicate_value=case["predicate"],
        loop_counts=case["loop_counts"],
    )
    expect = case["expect"]
    assert move.next_node == expect["next"]
    assert dict(move.loop_counts) == expect["loop_counts"]
    assert (move.handback.value if move.handback else None) == expect["handback"]


def test_the_input_counts_are_not_mutated() -> None:
    doc = json.loads((VECTORS / "loop_and_choice.json").read_text())
    graph = Graph.from_json(doc["graph"], version="sha256:" + "0" * 64)
    counts = {"again": 1}
    successor(graph, "again", predicate_value=True, loop_counts=counts)
    assert counts == {"again": 1}


def test_a_predicate_without_a_value_is_refused() -> None:
    doc = json.loads((VECTORS / "linear.json").read_text())
    graph = Graph.from_json(doc["graph"], version="sha256:" + "0" * 64)
    with pytest.raises(ValueError, match="needs a boolean"):
        successor(graph, "in_stock")


@pytest.mark.parametrize("node", ["sleep-1", "end", "no-such-node"])
def test_only_worker_steps_have_successors(node: str) -> None:
    doc = json.loads((VECTORS / "linear.json").read_text())
    graph = Graph.from_json(doc["graph"], version="sha256:" + "0" * 64)
    with pytest.raises(ValueError, match="not a step a worker runs"):
        successor(graph, node)


def test_every_reason_has_a_lower_case_wire_name() -> None:
    assert all(reason.value == reason.name.lower() for reason in Handback)


@pytest.mark.parametrize(
    "case", json.loads((VECTORS / "lease_budget.json").read_text())["cases"], ids=str
)
def test_lease_budget(case: dict[str, Any]) -> None:
    assert lease_budget_left(case["remaining_ms"], case["lease_ms"]) is case["expect"]
