"""Every shipped definition rendered by the real `dot` into every format; outputs checked."""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from wiggle_render import ensure_dot, render, to_dot

from wiggle.graph import Await, Graph, Join, Predicate, Task

ROOT = Path(__file__).resolve().parents[3]
DEFINITIONS = sorted((ROOT / "definitions").glob("*.yaml"))
STEMS = [path.stem for path in DEFINITIONS]
SVG = "{http://www.w3.org/2000/svg}"


def _names(graph: Graph) -> set[str]:
    """The activity names a reader must find on the diagram."""
    names = set()
    for node in graph:
        if isinstance(node, Task | Join):
            names.add(node.activity)
        elif isinstance(node, Predicate):
            names.add(node.activity + "?")
        elif isinstance(node, Await):
            # A human step is drawn by its name (the task's), not by its signal `task:NAME`.
            names.add(node.id if node.human is not None else node.signal)
    return names


def test_there_are_at_least_six_definitions():
    assert len(STEMS) >= 6


@pytest.mark.parametrize("stem", STEMS)
def test_svg_is_xml_and_shows_every_step(stem, compiled):
    graph = compiled[stem].graph
    root = ET.fromstring(render(graph, "svg"))
    assert root.tag == f"{SVG}svg"
    texts = {"".join(t.itertext()).strip() for t in root.iter(f"{SVG}text")}
    assert _names(graph) <= texts
    assert graph.name in texts
    # one <g class="node"> per graph node, plus the start marker and any filtered markers
    drawn = {g.find(f"{SVG}title").text for g in root.iter(f"{SVG}g") if g.get("class") == "node"}
    assert set(graph.nodes) <= drawn


@pytest.mark.parametrize("stem", STEMS)
def test_png_has_the_png_signature(stem, compiled):
    data = render(compiled[stem].graph, "png")
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    assert len(data) > 1000


@pytest.mark.parametrize("stem", STEMS)
def test_pdf_has_the_pdf_header_and_trailer(stem, compiled):
    data = render(compiled[stem].graph, "pdf")
    assert data.startswith(b"%PDF-")
    assert b"%%EOF" in data[-64:]


@pytest.mark.parametrize("stem", STEMS)
def test_dot_text_is_accepted_by_graphviz_without_warnings(stem, compiled):
    source = render(compiled[stem].graph, "dot")
    assert source == to_dot(compiled[stem].graph).encode()
    done = subprocess.run(
        [ensure_dot(), "-Tcanon"], input=source, capture_output=True, check=False, timeout=60
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stderr == b""


def test_a_live_instance_renders_with_its_states(compiled):
    graph = compiled["order-fulfilment"].graph
    states = {"validate": "DONE", "authorise": {"RUNNING": 1}, "print_label": "JOINED"}
    root = ET.fromstring(render(graph, "svg", instance=states))
    texts = {"".join(t.itertext()).strip() for t in root.iter(f"{SVG}text")}
    assert {"DONE", "RUNNING 1", "JOINED"} <= texts


@pytest.mark.parametrize("stem", STEMS)
def test_the_committed_diagram_exists_and_is_for_this_flow(stem, compiled):
    path = ROOT / "docs" / "flows" / f"{stem}.svg"
    assert path.is_file(), "run python scripts/render_definitions.py"
    root = ET.parse(path).getroot()
    texts = {"".join(t.itertext()).strip() for t in root.iter(f"{SVG}text")}
    # Graphviz versions differ in their bytes, so compare what the diagram says, not the file.
    short_version = compiled[stem].version[:19] + "…"
    assert any(text.startswith(short_version) for text in texts), (
        "stale diagram: re-run scripts/render_definitions.py"
    )
    assert _names(compiled[stem].graph) <= texts


def _label_clearance(node: dict[str, Any], *, face: int = 1) -> float:
    """Points between the top of a node's first text line (its baseline plus 0.75 of its size,
    about Helvetica's cap height) and the `face`-th highest edge of its outline."""
    ys = sorted({y for op in node["_draw_"] if op["op"] in "PpBb" for _, y in op["points"]})
    size, first = 0.0, None
    for op in node["_ldraw_"]:
        if op["op"] == "F":
            size = op["size"]
        if op["op"] == "T" and first is None:
            first = op["pt"][1] + 0.75 * size
    assert first is not None
    return ys[-face] - first


def test_a_subflow_caption_clears_the_top_face_of_its_box(compiled):
    """The box3d outline draws a face along the node's top edge, and the small "subflow"
    caption sat against it. Laid out by the real `dot`, the caption is at least as far below
    the front face as a two-line task's first line is below its box's top."""
    source = to_dot(compiled["nightly-batch"].graph)
    done = subprocess.run(
        [ensure_dot(), "-Tjson"], input=source, capture_output=True, text=True, check=True
    )
    nodes = {o.get("name"): o for o in json.loads(done.stdout)["objects"]}
    task = _label_clearance(nodes["snapshot_ledger"])  # its name, then "timeout 10m"
    subflow = _label_clearance(nodes["nightly-batch-item"], face=2)  # below the back face's edge
    assert subflow >= task, (subflow, task)
