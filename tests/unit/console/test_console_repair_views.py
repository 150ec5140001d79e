"""The pure parts of the console's repair pages: the search box's conditions, a list's filter as a
bulk filter, the reset picker's offer, a bulk form's checks, an incident's retry filter, the
migration node map and the plans kept."""

from __future__ import annotations

from urllib.parse import parse_qs

import pytest

from wiggle.client import Incident
from wiggle.compiler import load_flow
from wiggle.console._bulk import bulk_request
from wiggle.console._forms import JsonInputError
from wiggle.console._listing import conditions_text, list_query, split_conditions
from wiggle.console._migrations import PlanStore, parse_map
from wiggle.console._operate import retry_query
from wiggle.console._targets import reset_offer

FAN = b"""
wiggle: 1
name: fan
steps:
  - task: a
  - parallel:
      x:
        - task: b
      y:
        - task: c
    combine: m
  - task: d
"""


@pytest.mark.parametrize(
    ("text", "conditions"),
    [
        (
            "status=FAILED age>1h order=A-1002 total>5000",
            ["status=FAILED", "age>1h", "order=A-1002", "total>5000"],
        ),
        ("reason~card declined status=FAILED", ["reason~card declined", "status=FAILED"]),
        ('reason~"x=1 y" flow=a', ["reason~x=1 y", "flow=a"]),
        ("  ", []),
        ("total >= 5", ["total >= 5"]),  # not a condition: the server says what is wrong
    ],
)
def test_the_search_box_splits_into_conditions_and_back(text, conditions):
    assert split_conditions(text) == conditions
    assert split_conditions(conditions_text(conditions)) == conditions


def test_an_unclosed_quote_is_refused():
    with pytest.raises(JsonInputError, match="not closed"):
        split_conditions('reason~"oops')


def test_a_lists_filter_becomes_a_bulk_filter_unless_it_has_start_times():
    query, problems = list_query(
        {"flow": "charge", "status": "failed", "q": "A-", "where": "total>5 reason~bank down"}
    )
    assert problems == []
    where, problem = query.bulk_conditions("sha256:" + "0" * 64)
    assert problem == ""
    assert where == [
        "flow=charge",
        "status=FAILED",
        "version=sha256:" + "0" * 64,
        "id~A-",
        "total>5",
        "reason~bank down",
    ]
    timed, _ = list_query({"flow": "charge", "since": "2025-01-01T00:00"})
    assert timed.bulk_conditions("")[1].startswith("a bulk action cannot take the start-time")
    assert list_query({})[0].bulk_conditions("")[1].startswith("filter the list first")
    assert list_query({"where": " ".join(["a=1"] * 21)})[1] == [
        "the search has 21 conditions; at most 20"
    ]


def test_the_reset_picker_offers_passed_top_level_nodes_in_the_order_entered():
    graph = load_flow(FAN, "fan.yaml").graph
    inputs = {
        "parallel-1": {"context": {"n": 2}, "at_ms": 20},
        "a": {"context": {"n": 1}, "at_ms": 10},
        "b": {"context": {}, "at_ms": 15},  # not kept by the engine; never offered anyway
    }
    offer = reset_offer(graph, "RUNNING", "", inputs)
    assert [t.node_id for t in offer.targets] == ["a", "parallel-1"]
    assert offer.target("a") is not None and offer.target("a").context == {"n": 1}
    assert offer.why_not["b"].startswith("inside parallel block parallel-1")
    assert "has not reached it" in offer.why_not["d"]
    assert "end of the flow" in offer.why_not["end"]
    assert reset_offer(graph, "CANCELLED", "", inputs).targets == []
    child = reset_offer(graph, "FAILED", "parent-1", inputs)
    assert child.targets == [] and "reset its parent parent-1" in child.refused
    assert reset_offer(graph, "FAILED", "parent-1", {}).refused  # even with nothing recorded
    assert [t.node_id for t in reset_offer(graph, "RUNNING", "parent-1", inputs).targets] == [
        "a",
        "parallel-1",
    ]


def test_a_bulk_form_is_checked_before_anything_is_previewed():
    ok, problems = bulk_request({"action": "signal", "signal": "go", "payload": '{"a": 1}'})
    assert problems == [] and ok.params() == {"name": "go", "payload": {"a": 1}}
    assert ok.describe() == "send signal go"
    assert bulk_request({"action": "reset", "node": "n"})[0].params() == {"node": "n"}
    assert bulk_request({"action": "cancel", "reason": "why"})[0].params() == {"reason": "why"}
    assert bulk_request({})[0].params() == {}  # retry
    assert bulk_request({"action": "explode"})[1] == [
        "action 'explode' is not one of retry, cancel, reset, signal"
    ]
    assert bulk_request({"action": "reset"})[1] == ["a bulk reset needs the node to reset to"]
    assert (
        "not valid JSON" in bulk_request({"action": "signal", "signal": "g", "payload": "{"})[1][0]
    )
    assert "from 0 to 10000" in bulk_request({"rate": "fast"})[1][0]
    assert "from 0 to 10000" in bulk_request({"rate": "20000"})[1][0]
    assert bulk_request({"rate": "2.5"})[0].rate_per_s == 2.5


def test_an_incidents_retry_names_its_flow_failed_and_reason():
    def incident(reason: str) -> Incident:
        return Incident("charge", "charge", reason, 2, 1, 2, ["i1"])

    assert parse_qs(retry_query(incident("step 'charge' failed: declined"))) == {
        "action": ["retry"],
        "where": ["flow=charge", "status=FAILED", "reason=step 'charge' failed: declined"],
    }
    long = parse_qs(retry_query(incident("x" * 2000)))["where"][2]
    assert long.startswith("reason~x") and len(long) < 1000
    assert parse_qs(retry_query(incident("")))["where"] == ["flow=charge", "status=FAILED"]


def test_the_node_map_and_the_plans_kept():
    assert parse_map("a=b\n c = d , e=f") == ({"a": "b", "c": "d", "e": "f"}, [])
    assert parse_map("oops\n=x") == (
        {},
        [
            "node map 'oops': write OLD=NEW (node ids)",
            "node map '=x': write OLD=NEW (node ids)",
        ],
    )
    store = PlanStore(size=2)
    keys = [store.add({"hash": f"sha256:{n:064x}"}) for n in range(3)]
    assert keys[2] == f"{2:064x}"  # the whole digest: no two plans share a key
    assert store.get(keys[0]) is None  # the oldest forgotten
    assert store.get(keys[2]) == {"hash": f"sha256:{2:064x}"}
