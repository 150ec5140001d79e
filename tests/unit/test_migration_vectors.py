"""Runs spec/conformance/migration/ against wiggle.migration: the diff of the two versions and
the plan of each case's tokens (the vectors any planner must agree with)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from wiggle.compiler import load_flow
from wiggle.migration import RULES, MapError, TokenPos, check_mapping, diff_graphs, plan_instance

VECTORS = Path(__file__).resolve().parents[2] / "spec" / "conformance" / "migration"
FILES = sorted(VECTORS.glob("*.json"))


def _load(path: Path) -> dict[str, Any]:
    doc = json.loads(path.read_text())
    doc["old_graph"] = load_flow(doc["old"], f"{path.name}:old").graph
    doc["new_graph"] = load_flow(doc["new"], f"{path.name}:new").graph
    return doc


def _cases() -> list[Any]:
    params = []
    for path in FILES:
        doc = _load(path)
        for case in doc["cases"]:
            params.append(pytest.param(doc, case, id=f"{path.stem}: {case['description']}"))
    return params


def test_the_vectors_cover_every_rule_and_classification() -> None:
    assert len(_cases()) >= 30
    rules: set[str] = set()
    changes: set[str] = set()
    for path in FILES:
        doc = json.loads(path.read_text())
        changes |= {v[0] for v in doc["diff"]["nodes"].values()}
        for case in doc["cases"]:
            rules |= set(case["expect"].get("blockers", []))
    assert rules == set(RULES)
    assert changes == {"unchanged", "changed", "moved", "kind_changed", "added", "removed"}


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_diff_vector(path: Path) -> None:
    doc = _load(path)
    got = diff_graphs(doc["old_graph"], doc["new_graph"])
    by_node = got.by_node()
    for node, expected in doc["diff"]["nodes"].items():
        change = by_node[node]
        assert change.change == expected[0], f"{node}: {change}"
        if len(expected) > 1:
            assert list(change.fields) == expected[1], f"{node}: {change}"
    if "edges_added" in doc["diff"]:
        assert [list(e) for e in got.edges_added] == doc["diff"]["edges_added"]
    if "edges_removed" in doc["diff"]:
        assert [list(e) for e in got.edges_removed] == doc["diff"]["edges_removed"]


@pytest.mark.parametrize(("doc", "case"), _cases())
def test_plan_vector(doc: dict[str, Any], case: dict[str, Any]) -> None:
    old, new = doc["old_graph"], doc["new_graph"]
    tokens = [TokenPos.from_json(t) for t in case["tokens"]]
    mapping = case.get("map", {})
    expect = case["expect"]
    if "error" in expect:
        with pytest.raises(MapError, match=expect["error"]):
            check_mapping(old, new, mapping)
        return
    check_mapping(old, new, mapping)
    plan = plan_instance(
        old,
        new,
        tokens,
        mapping=mapping,
        buffered_signals=case.get("buffered_signals", []),
        timers=case.get("timers", "keep"),
    )
    assert plan.outcome == expect["outcome"], plan.blockers
    if plan.outcome == "migrate":
        assert [[m.node, m.to, m.timer] for m in plan.moves] == expect["moves"]
    else:
        assert [b.rule for b in plan.blockers] == expect["blockers"]
        for b in plan.blockers:
            assert b.message  # every blocker says what to do
