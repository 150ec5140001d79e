"""The console's pure parts: the SVG allow-list, the list's query string (checked, paged both
ways, sorted), times, step history, input checks."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from urllib.parse import parse_qsl

from wiggle.client import Instance, InstanceStatus
from wiggle.console._forms import awaited_signals, parse_json_input, schema_problems
from wiggle.console._listing import failed_at, list_query, resolve_version, sort_rows
from wiggle.console._svg import _clean
from wiggle.console._text import ago, duration

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


def test_filters_round_trip_through_the_query_string():
    query, problems = list_query(
        {"flow": "orders", "status": "failed", "q": "abc", "since": "2025-01-31T12:00"}
    )
    assert problems == []
    assert (query.flow, query.status, query.id_contains) == ("orders", "FAILED", "abc")
    assert query.since_ms == 1738324800000
    again, _ = list_query(dict(parse_qsl(query.query())))
    assert again == query


def test_bad_filters_are_named_not_dropped():
    """?status=BOGUS and ?since=notadate used to show the whole list as if unfiltered."""
    _, problems = list_query(
        {"status": "BOGUS", "since": "notadate", "page_size": "zz", "sort": "x", "version": "?"}
    )
    assert problems == [
        "status 'BOGUS' is not one of RUNNING, COMPLETED, FAILED, CANCELLED",
        "started since 'notadate' is not a date and time like 2025-01-31T12:00",
        "page size 'zz' is not a number from 1 to 200",
        "version '?' is neither sha256:<64 hex> nor the first hex digits of one",
        "cannot sort by 'x'; sort by one of started, updated, instance, flow, status, step",
    ]
    assert list_query({"page_size": "500"})[1] == ["page size '500' is not a number from 1 to 200"]


def test_paging_keeps_the_page_size_and_goes_back_page_by_page():
    first, _ = list_query({"flow": "orders", "page_size": "20"})
    assert first.page_number == 1 and first.previous_query() == ""
    second, _ = list_query(dict(parse_qsl(first.next_query("T2"))))
    assert (second.page, second.back, second.page_size) == ("T2", (), 20)
    assert second.page_number == 2
    third, _ = list_query(dict(parse_qsl(second.next_query("T3"))))
    assert (third.page, third.back, third.page_size, third.flow) == ("T3", ("T2",), 20, "orders")
    back, _ = list_query(dict(parse_qsl(third.previous_query())))
    assert back == second
    start, _ = list_query(dict(parse_qsl(second.previous_query())))
    assert start == first


def test_a_short_version_names_the_one_registered_version_it_starts():
    a = "sha256:f324e5a28a92" + "0" * 52
    b = "sha256:f324e5ff0000" + "0" * 52
    assert resolve_version("f324e5a28a92", [a, b]) == (a, "")
    assert resolve_version("sha256:f324e5a", [a, b]) == (a, "")
    assert resolve_version(a, []) == (a, "")
    assert resolve_version("f324e5", [a, b])[1].startswith("version 'f324e5' is ambiguous")
    assert resolve_version("beef", [a, b]) == ("", "no registered version starts with 'beef'")


def test_rows_sort_within_the_page():
    def row(instance_id, status, created, updated, current, reason):
        status = InstanceStatus(status)
        return Instance(instance_id, "f", "v", status, {}, reason, "SERVER", "", created, updated,
                        current_node=current)  # fmt: skip

    rows = [
        row("b", "RUNNING", 2, 9, "x", ""),
        row("a", "FAILED", 3, 5, "", "step 'y' failed: no"),
        row("c", "COMPLETED", 1, 7, "", ""),
    ]
    assert [r.instance_id for r in sort_rows(rows, "updated", True)] == ["b", "c", "a"]
    assert [r.instance_id for r in sort_rows(rows, "started", False)] == ["c", "b", "a"]
    assert [r.instance_id for r in sort_rows(rows, "step", False)] == ["c", "b", "a"]
    assert [failed_at(r) for r in sort_rows(rows, "instance", False)] == ["y", "", ""]
    assert sort_rows(rows, "", True) == rows


def test_times_and_durations_read_as_people_say_them():
    assert [duration(ms) for ms in (850, 4200, 45_000, 200_000, 7_500_000, 300_000_000)] == [
        "850 ms",
        "4.2 s",
        "45 s",
        "3 min 20 s",
        "2 h 5 min",
        "3 d 11 h",
    ]
    assert ago(1_000, 201_000) == "3 min ago"
    assert ago(10_000, 5_000) == "in 5.0 s"
    assert ago(5_000, 5_400) == "just now"
    assert ago(0, 5) == ""


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
