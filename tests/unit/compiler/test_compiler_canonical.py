"""RFC 8785 canonical JSON, the shipped schemas, and round trips through the graph readers."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator  # type: ignore[import-untyped,unused-ignore]

import wiggle.compiler
from wiggle.compiler import canonical_json, graph_from_canonical, load_flow
from wiggle.errors import FlowError
from wiggle.graph import Graph

REPO = Path(__file__).resolve().parents[3]
PACKAGE_SCHEMAS = Path(wiggle.compiler.__file__).parent / "schema"


# -- JCS ---------------------------------------------------------------------------------------


def test_keys_sort_by_utf16_code_units() -> None:
    # U+E000 sorts after U+1F600 in UTF-16 (a surrogate pair starts 0xD83D), before it in UTF-8.
    value = {"\ue000": 1, "\U0001f600": 2, "b": 3, "a": 4, "aa": 5, "A": 6}
    assert canonical_json(value) == '{"A":6,"a":4,"aa":5,"b":3,"\U0001f600":2,"\ue000":1}'.encode()


def test_strings_are_escaped_like_json_stringify() -> None:
    text = 'q"b\\\b\f\n\r\t\x01\x1f\x7f/é€\u2028'
    expected = '"q\\"b\\\\\\b\\f\\n\\r\\t\\u0001\\u001f\x7f/é€\u2028"'
    assert canonical_json(text) == expected.encode()


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (0.0, "0"),
        (-0.0, "0"),
        (1.0, "1"),
        (-1.5, "-1.5"),
        (0.1, "0.1"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1e-6, "0.000001"),
        (1e-7, "1e-7"),
        (123456789.125, "123456789.125"),
        (333333333.33333329, "333333333.3333333"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (4.35, "4.35"),
    ],
)
def test_numbers_use_ecmascript_form(number: float, text: str) -> None:
    assert canonical_json(number) == text.encode()


def test_nested_structures_have_no_whitespace() -> None:
    value = {"b": [1, True, None, {"z": "x", "y": []}], "a": {}}
    assert canonical_json(value) == b'{"a":{},"b":[1,true,null,{"y":[],"z":"x"}]}'


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), object()])
def test_non_json_values_are_refused(bad: object) -> None:
    with pytest.raises((ValueError, TypeError)):
        canonical_json(bad)


def test_input_schema_floats_are_hashed_in_jcs_form() -> None:
    a = load_flow("wiggle: 1\nname: x\ninput: {maximum: 1.50}\nsteps: [{task: a}]\n")
    b = load_flow(
        '{"wiggle": 1, "name": "x", "input": {"maximum": 15e-1}, "steps": [{"task": "a"}]}'
    )
    assert b'"input":{"maximum":1.5}' in a.canonical
    assert a.version == b.version


# -- schemas -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["flow.schema.json", "graph.schema.json"])
def test_packaged_schema_is_byte_identical_to_spec(name: str) -> None:
    # spec/schema/ is the source; `python scripts/update_compile_vectors.py` copies it here.
    assert (PACKAGE_SCHEMAS / name).read_bytes() == (REPO / "spec" / "schema" / name).read_bytes()


@pytest.mark.parametrize("name", ["flow.schema.json", "graph.schema.json"])
def test_schemas_are_valid_draft_2020_12(name: str) -> None:
    Draft202012Validator.check_schema(json.loads((REPO / "spec" / "schema" / name).read_text()))


def _walk(schema: object, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(schema, dict):
        yield path, schema
        for key, sub in schema.items():
            yield from _walk(sub, f"{path}/{key}")
    elif isinstance(schema, list):
        for i, sub in enumerate(schema):
            yield from _walk(sub, f"{path}/{i}")


def test_flow_schema_closes_every_object_and_documents_every_property() -> None:
    schema = json.loads((REPO / "spec" / "schema" / "flow.schema.json").read_text())
    for path, node in _walk(schema):
        if node.get("type") == "object" and "properties" in node:
            assert node.get("additionalProperties") is False, path
        if path.endswith("/properties"):
            for key, prop in node.items():
                assert prop.get("title") and prop.get("description"), f"{path}/{key}"


# -- graph readers -----------------------------------------------------------------------------

SAMPLE = """\
wiggle: 1
name: sample
queue: q
steps:
  - task: a
  - filter: f
  - parallel: {x: [{task: b}], y: [{sleep: 1s}]}
    combine: m
  - for_each: /items
    steps: [{subflow: child}]
    combine: m
  - await: s
    timeout: 1h
    apply: merge
  - choice: [{when: p, steps: [{task: c}]}]
    otherwise: [{sleep: {until: /t}}]
  - loop: {steps: [{task: d}], while: w}
"""


def test_compiled_output_validates_against_the_graph_schema() -> None:
    flow = load_flow(SAMPLE)
    schema = json.loads((REPO / "spec" / "schema" / "graph.schema.json").read_text())
    Draft202012Validator(schema).validate(flow.document)
    assert Graph.from_json(flow.document, flow.version) == flow.graph


def test_graph_from_canonical_round_trips() -> None:
    flow = load_flow(SAMPLE)
    again = graph_from_canonical(flow.canonical)
    assert (again.name, again.version, again.canonical) == (flow.name, flow.version, flow.canonical)
    assert again.graph == flow.graph
    assert set(again.nx.edges) == set(flow.nx.edges)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["nodes"]["a"].pop("queue"), "missing required key 'queue'"),
        (lambda d: d["nodes"]["a"].update(next="nowhere"), "next 'nowhere' is not a node"),
        (lambda d: d.update(start="ghost"), "start 'ghost' is not a node"),
        (lambda d: d["nodes"]["a"].update(colour="red"), "unknown key 'colour'"),
        (lambda d: d["nodes"]["s"].update(timeout_ms=None), "/nodes/s/"),
        (lambda d: d["nodes"]["sleep-2"].update(duration_ms=5), "/nodes/sleep-2/"),
    ],
)
def test_graph_from_canonical_refuses_bad_graphs(
    mutate: Callable[[dict[str, Any]], object], message: str
) -> None:
    document = load_flow(SAMPLE).document
    document = json.loads(json.dumps(document))
    mutate(document)
    with pytest.raises(FlowError, match=message):
        graph_from_canonical(canonical_json(document))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"{nope", "graph is not JSON"),
        (b"\xff", "graph is not JSON"),
        (b"[]", "must be of type object"),
        (b'{"format":1,"input":' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply"),
    ],
)
def test_graph_from_canonical_refuses_non_graphs(data: bytes, message: str) -> None:
    with pytest.raises(FlowError, match=message):
        graph_from_canonical(data)


def test_graph_from_canonical_accepts_reformatted_bytes() -> None:
    flow = load_flow(SAMPLE)
    pretty = json.dumps(json.loads(flow.canonical), indent=2).encode()
    assert graph_from_canonical(pretty).version == flow.version


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_number_form_round_trips_and_is_shortest(number: float) -> None:
    text = canonical_json(number).decode()
    assert float(text) == number
    assert text == text.strip() and "E" not in text and not text.endswith(".0")
    assert len(text.lstrip("-").replace(".", "").split("e")[0].strip("0")) <= 17


def test_public_names() -> None:
    # The document-reading names serve wiggle.testing's scenario files (durations, source
    # positions, schema messages written as the compiler writes them); analyse_flow, NodeClaim
    # and flow_schema serve the language server (wiggle.lsp).
    assert sorted(wiggle.compiler.__all__) == [
        "CompiledFlow",
        "DocumentPath",
        "FlowAnalysis",
        "MAX_BYTES",
        "NodeClaim",
        "SourceMap",
        "SubflowRef",
        "analyse_flow",
        "canonical_json",
        "flow_schema",
        "graph_from_canonical",
        "load_document",
        "load_flow",
        "load_flow_file",
        "parse_duration",
        "schema_diagnostics",
        "subflow_references",
    ]
