"""The console's pure parts: the SVG allow-list, filters from query strings, input checks."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from urllib.parse import parse_qsl

from wiggle.console._svg import _clean
from wiggle.console._views import (
    awaited_signals,
    filter_from_query,
    filter_query,
    parse_json_input,
    schema_problems,
)

HOSTILE_SVG = """<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink"
  onload="alert(1)" width="10"><script>alert(2)</script>
  <g class="node" onclick="alert(3)"><title>a</title>
    <a xlink:href="javascript:alert(4)"><text x="1" style="x">&lt;b&gt;</text></a></g>
  <foreignObject><div>x</div></foreignObject></svg>"""


def test_the_svg_keeps_only_allowed_elements_and_attributes():
    cleaned = _clean(ET.fromstring(HOSTILE_SVG))
    assert cleaned is not None
    markup = ET.tostring(cleaned, encoding="unicode")
    for bad in ("script", "onload", "onclick", "javascript", "foreignObject", "style=", "href"):
        assert bad not in markup
    assert "&lt;b&gt;" in markup and 'width="10"' in markup


def test_filters_round_trip_through_the_query_string_and_drop_nonsense():
    query = filter_from_query(
        {"flow": "orders", "status": "failed", "q": "abc", "since": "2025-01-31T12:00"}
    )
    assert (query.flow, query.status, query.id_contains) == ("orders", "FAILED", "abc")
    assert query.started_after_ms == 1738324800000
    again = filter_from_query(dict(parse_qsl(filter_query(query))))
    assert again.started_after_ms == query.started_after_ms and again.status == "FAILED"
    assert filter_from_query({"status": "<x>", "since": "soon", "page_size": "zz"}) == (
        filter_from_query({})
    )


def test_input_is_checked_as_json_and_against_the_schema():
    assert parse_json_input("", "x") is None
    try:
        parse_json_input("{oops", "the payload")
    except ValueError as exc:
        assert "the payload is not valid JSON" in str(exc)
    else:
        raise AssertionError("accepted broken JSON")
    schema = {"type": "object", "required": ["n"], "properties": {"n": {"type": "number"}}}
    assert schema_problems(schema, {"n": 1}) == []
    assert schema_problems(schema, {"n": "x"}) == ["/n: 'x' is not of type 'number'"]
    assert schema_problems(None, 5) == []


def test_awaited_signals_are_listed_once_in_node_order():
    graph = {
        "nodes": {
            "a": {"kind": "await", "signal": "go"},
            "b": {"kind": "task"},
            "c": {"kind": "await", "signal": "stop"},
            "d": {"kind": "await", "signal": "go"},
        }
    }
    assert awaited_signals(graph) == ["go", "stop"]
