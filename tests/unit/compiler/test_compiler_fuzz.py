"""Whatever the input, the compiler answers with a CompiledFlow or a FlowError: no traceback."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wiggle.compiler import graph_from_canonical, load_flow
from wiggle.compiler._checks import check_reachable
from wiggle.compiler._compile import Claim, Compiled
from wiggle.compiler._graph import graph_to_nx
from wiggle.compiler._loader import SourceMap
from wiggle.errors import FlowError

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

VALID = {
    "wiggle": 1,
    "name": "fuzz",
    "steps": [
        {"task": "a", "retry": {"max_attempts": 2, "initial": "1s"}},
        {"parallel": {"x": [{"sleep": "1s"}], "y": [{"filter": "p"}]}, "combine": "c"},
        {"for_each": "/i", "steps": [{"subflow": "s"}], "combine": "c", "max_concurrency": 2},
        {"await": "sig", "timeout": "1m", "on_timeout": [{"task": "t"}], "apply": "ap"},
        {"choice": [{"when": "w", "steps": [{"task": "b"}]}], "otherwise": [{"task": "o"}]},
        {"loop": {"steps": [{"task": "l"}], "while": "again", "max_iterations": 3}},
    ],
}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**60), 2**60) | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)


def _outcome(source: str | bytes) -> None:
    try:
        flow = load_flow(source, "fuzz.yaml")
    except FlowError as error:
        assert error.diagnostics, "a FlowError must say what is wrong"
        for d in error.diagnostics:
            assert d.file == "fuzz.yaml" and d.message
            assert d.line >= 0 and d.column >= 0
    else:
        assert graph_from_canonical(flow.canonical).version == flow.version


@SETTINGS
@given(st.text(max_size=200))
def test_arbitrary_text(text: str) -> None:
    _outcome(text)


@SETTINGS
@given(st.binary(max_size=200))
def test_arbitrary_bytes(data: bytes) -> None:
    _outcome(data)


@SETTINGS
@given(json_values)
def test_arbitrary_json_documents(value: Any) -> None:
    _outcome(json.dumps(value))


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(value, dict):
        for k, v in value.items():
            out.extend(_paths(v, (*path, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.extend(_paths(v, (*path, i)))
    return out


@SETTINGS
@given(st.data())
def test_valid_flow_with_one_value_replaced(data: st.DataObject) -> None:
    doc = json.loads(json.dumps(VALID))
    path = data.draw(st.sampled_from(_paths(doc)[1:]))
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    if data.draw(st.booleans()) and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = data.draw(json_values)
    _outcome(json.dumps(doc))


@SETTINGS
@given(st.data())
def test_valid_flow_text_with_a_slice_cut_out(data: st.DataObject) -> None:
    text = json.dumps(VALID, indent=1)
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, min(len(text), start + 20)))
    _outcome(text[:start] + text[end:])


def test_unreachable_node_is_reported() -> None:
    # No flow the compiler accepts can strand a node today; build the graph by hand.
    document = {
        "start": "a",
        "nodes": {
            "a": {"kind": "sleep", "duration_ms": 1, "until": None, "next": "end"},
            "orphan": {"kind": "sleep", "duration_ms": 1, "until": None, "next": "end"},
            "end": {"kind": "end"},
        },
    }
    source = SourceMap("f.yaml", values={("steps", 1, "sleep"): (5, 12)})
    compiled = Compiled(
        document,
        graph_to_nx(document),
        [Claim("a", ("steps", 0)), Claim("orphan", ("steps", 1, "sleep"))],
    )
    [problem] = check_reachable(compiled, source)
    assert (problem.line, problem.column) == (5, 12)
    assert "step 'orphan' can never be reached" in problem.message
