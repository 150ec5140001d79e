"""The flow's diagram as inline SVG: the project's renderer, then made safe to inline and
annotated so the page (and its tests) can find each node's live state.

Graphviz escapes the text it is given, and the page's Content-Security-Policy blocks scripts
anyway; the SVG is still parsed and rebuilt from an allow-list of elements and attributes, so
nothing a flow author wrote can reach the page as markup.
"""

from __future__ import annotations

import functools
import threading
import xml.etree.ElementTree as ET
from collections.abc import Mapping

import orjson

from wiggle.graph import Graph

__all__ = ["diagram"]

_SVG = "http://www.w3.org/2000/svg"

_ELEMENTS = frozenset(
    {"svg", "g", "title", "path", "polygon", "polyline", "ellipse", "circle", "rect", "line"}
    | {"text", "tspan", "a"}
)
_ATTRIBUTES = frozenset(
    {"width", "height", "viewBox", "transform", "id", "class", "points", "d", "cx", "cy", "rx"}
    | {"ry", "r", "x", "y", "x1", "y1", "x2", "y2", "fill", "stroke", "stroke-width"}
    | {"stroke-dasharray", "stroke-opacity", "fill-opacity", "text-anchor", "font-family"}
    | {"font-size", "font-weight", "font-style", "text-decoration"}
)

_lock = threading.Lock()


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _clean(element: ET.Element) -> ET.Element | None:
    name = _local(element.tag)
    if name not in _ELEMENTS:
        return None
    if name == "a":  # keep the link's children, drop the link (and its xlink:href)
        group = ET.Element("g")
        target = group
    else:
        target = ET.Element(name)
        for key, value in element.attrib.items():
            if key in _ATTRIBUTES:
                target.set(key, value)
    target.text = element.text
    target.tail = element.tail
    for child in element:
        cleaned = _clean(child)
        if cleaned is not None:
            target.append(cleaned)
    return target


def _annotate(
    root: ET.Element, states: Mapping[str, str | Mapping[str, int]], current: str
) -> None:
    for group in root.iter("g"):
        if "node" not in group.get("class", "").split():
            continue
        title = group.find("title")
        node_id = (title.text or "") if title is not None else ""
        group.set("data-node", node_id)
        classes = ["node"]
        counts = states.get(node_id)
        if isinstance(counts, str):  # a mark (the diff picture: ADDED, CHANGED, ...)
            group.set("data-state", counts)
            classes.append("lit")
        elif counts:
            live = [s for s in counts if s != "DONE"]
            group.set("data-state", (live or ["DONE"])[0])
            group.set("data-counts", " ".join(f"{s}:{n}" for s, n in sorted(counts.items())))
            classes.append("lit")
        if node_id and node_id == current:
            classes.append("current")
        group.set("class", " ".join(classes))


@functools.lru_cache(maxsize=256)
def _render(canonical: bytes, version: str, states_json: bytes, current: str, caption: str) -> str:
    from wiggle_render import render  # type: ignore[import-not-found, unused-ignore]

    graph = Graph.from_json(orjson.loads(canonical), version)
    states = orjson.loads(states_json)
    raw = render(graph, "svg", instance=states or None, caption=caption)
    parsed = ET.fromstring(raw)
    cleaned = _clean(parsed)
    if cleaned is None:  # pragma: no cover - Graphviz always answers an <svg>
        return ""
    _annotate(cleaned, states, current)
    cleaned.set("class", "flow-graph")
    cleaned.set("role", "img")
    cleaned.set("xmlns", _SVG)
    return ET.tostring(cleaned, encoding="unicode")


def diagram(
    canonical: bytes,
    version: str,
    states: Mapping[str, str | Mapping[str, int]] | None = None,
    current: str = "",
    caption: str = "",
) -> str:
    """Safe inline SVG markup of the flow, nodes lit by `states` (node id -> state -> count,
    or node id -> a mark such as ADDED) and the node `current` marked, with an optional
    `caption` under the title. Cached: the same picture is drawn by `dot` once."""
    key = orjson.dumps(states or {}, option=orjson.OPT_SORT_KEYS)
    with _lock:  # one `dot` at a time: the machine is small and the cache fills quickly
        return _render(canonical, version, key, current, caption)
