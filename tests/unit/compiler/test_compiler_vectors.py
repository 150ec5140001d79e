"""The compile conformance vectors, compared byte for byte (goldens are never rewritten here)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator  # type: ignore[import-untyped,unused-ignore]

from wiggle.compiler import load_flow_file
from wiggle.errors import FlowError
from wiggle.graph import Graph

ROOT = Path(__file__).resolve().parents[3]
VECTORS = ROOT / "spec" / "conformance" / "compile"


def _flows(kind: str) -> list[Path]:
    folder = VECTORS / kind
    return sorted(
        p for p in folder.iterdir() if p.suffix in (".yaml", ".json") and ".expected." not in p.name
    )


def _expected(flow: Path) -> Path:
    return flow.with_name(flow.name.rsplit(".", 1)[0] + ".expected.json")


INDEX = json.loads((VECTORS / "index.json").read_text())
GRAPH_SCHEMA = Draft202012Validator(
    json.loads((ROOT / "spec" / "schema" / "graph.schema.json").read_text())
)


def test_there_are_enough_vectors() -> None:
    assert len(_flows("valid")) >= 25
    assert len(_flows("invalid")) >= 15
    assert set(INDEX) == {p.name for p in _flows("valid")}


@pytest.mark.parametrize("flow", _flows("valid"), ids=lambda p: p.name)
def test_valid_vector(flow: Path) -> None:
    expected = _expected(flow).read_bytes()
    compiled = load_flow_file(flow)
    assert compiled.canonical == expected
    assert compiled.version == INDEX[flow.name]
    assert INDEX[flow.name] == "sha256:" + hashlib.sha256(expected).hexdigest()
    document = json.loads(expected)
    GRAPH_SCHEMA.validate(document)
    assert Graph.from_json(document, compiled.version) == compiled.graph


@pytest.mark.parametrize("flow", _flows("invalid"), ids=lambda p: p.name)
def test_invalid_vector(flow: Path) -> None:
    expected = json.loads(_expected(flow).read_text())["diagnostics"]
    with pytest.raises(FlowError) as caught:
        load_flow_file(flow)
    found = [
        {"line": d.line, "column": d.column, "path": d.path, "message": d.message}
        for d in caught.value.diagnostics
    ]
    assert found == expected


def test_every_block_and_option_is_covered() -> None:
    text = "\n".join(p.read_text() for p in _flows("valid"))
    for word in [
        "task:", "filter:", "choice:", "when:", "otherwise:", "parallel:", "combine:",
        "for_each:", "max_concurrency:", "sleep:", "until:", "await:", "timeout:", "on_timeout:",
        "apply:", "subflow:", "version:", "loop:", "while:", "max_iterations:", "id:", "queue:",
        "retry:", "max_attempts:", "backoff: fixed", "backoff: exponential", "initial:", "max:",
        "checkpoint:", "description:", "execution:", "input:",
    ]:  # fmt: skip
        assert word in text, word
