"""The shipped definitions: valid, at their golden versions, documented, and fully handled.

These live beside the rendering tests because the definitions ship with the renderer's diagrams;
they read files but run no engine.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import jsonschema
import pytest

from wiggle.compiler import CompiledFlow, load_flow_file
from wiggle.graph import Await, Join, Predicate, Task

ROOT = Path(__file__).resolve().parents[3]
DEFINITIONS_DIR = ROOT / "definitions"
DEFINITIONS = sorted(DEFINITIONS_DIR.glob("*.yaml"))
STEMS = [path.stem for path in DEFINITIONS]

SCHEMA_LINE = "# yaml-language-server: $schema=../spec/schema/flow.schema.json"
REQUIRED_SHAPES = {
    "order-fulfilment",
    "customer-onboarding",
    "invoice-approval",
    "document-pipeline",
    "nightly-batch",
    "nightly-batch-item",
    "payment-saga",
}


def _text(stem: str) -> str:
    return (DEFINITIONS_DIR / f"{stem}.yaml").read_text()


def _flow(stem: str) -> CompiledFlow:
    return load_flow_file(DEFINITIONS_DIR / f"{stem}.yaml")


def _handlers_path(stem: str) -> Path:
    match = re.search(r"--handlers (definitions/handlers/\w+\.py)", _text(stem))
    assert match, f"{stem}.yaml does not say which handlers run it"
    return ROOT / match.group(1)


def _activities(flow: CompiledFlow) -> set[str]:
    names = set()
    for node in flow.graph:
        if isinstance(node, Task | Join | Predicate):
            names.add(node.activity)
        elif isinstance(node, Await) and node.apply is not None:
            names.add(node.apply.activity)
    return names


def _handled(path: Path) -> set[str]:
    """Names registered with @activity / @activity("name") in a handlers file, read without
    importing it."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.FunctionDef):
            continue
        for deco in node.decorator_list:
            if isinstance(deco, ast.Name) and deco.id == "activity":
                names.add(node.name)
            elif isinstance(deco, ast.Call) and getattr(deco.func, "id", None) == "activity":
                names.add(deco.args[0].value if deco.args else node.name)  # type: ignore[attr-defined]
    return names


def test_the_promised_flows_are_shipped():
    assert set(STEMS) >= REQUIRED_SHAPES


@pytest.mark.parametrize("stem", STEMS)
def test_every_definition_validates_and_is_named_after_its_file(stem):
    assert _flow(stem).name == stem


def test_hashes_match_the_golden_file():
    golden = json.loads((DEFINITIONS_DIR / "hashes.json").read_text())
    current = {path.name: load_flow_file(path).version for path in DEFINITIONS}
    assert current == golden, (
        "after an intended change: scripts/update_definition_hashes.py --write"
    )


def test_the_hash_script_agrees():
    import runpy

    module = runpy.run_path(str(ROOT / "scripts" / "update_definition_hashes.py"))
    assert module["main"]([]) == 0


@pytest.mark.parametrize("stem", STEMS)
def test_the_header_points_editors_at_the_schema_and_explains_the_flow(stem):
    lines = _text(stem).splitlines()
    assert lines[0] == SCHEMA_LINE
    comment = [line for line in lines if line.startswith("#")]
    assert len(comment) >= 8, "explain the process in the header comment"
    assert any(line.startswith("# Sample input") for line in comment)
    assert any("wiggle run definitions/" + stem + ".yaml" in line for line in comment)


@pytest.mark.parametrize("stem", STEMS)
def test_the_sample_input_file_matches_the_header_and_the_input_schema(stem):
    match = re.search(r"# Sample input[^\n]*:\n((?:#   .*\n)+)", _text(stem))
    assert match
    in_comment = json.loads(" ".join(line[4:] for line in match.group(1).splitlines()))
    sample = json.loads((DEFINITIONS_DIR / "samples" / f"{stem}.json").read_text())
    assert sample == in_comment
    schema = _flow(stem).graph.input_schema
    if schema is not None:
        jsonschema.validate(sample, schema)


@pytest.mark.parametrize("stem", STEMS)
def test_every_activity_has_a_handler(stem):
    missing = _activities(_flow(stem)) - _handled(_handlers_path(stem))
    assert not missing, f"{_handlers_path(stem).name} lacks {sorted(missing)}"


def test_the_readme_lists_every_definition():
    readme = (DEFINITIONS_DIR / "README.md").read_text()
    for stem in STEMS:
        assert f"]({stem}.yaml)" in readme
