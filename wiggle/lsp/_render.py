"""The picture of a flow, as `wiggle render FLOW -o flow.svg` draws it, for editors that can
show it: the SVG text of the flow as currently written (Graphviz's `dot` must be installed)."""

from __future__ import annotations

from typing import Any

from wiggle.compiler import CompiledFlow

__all__ = ["svg"]


def svg(flow: CompiledFlow) -> dict[str, Any]:
    """{"svg": text, "name", "version"}, or {"error": why} when it cannot be drawn."""
    # tools/render, installed as wiggle_render; mypy sees it only with the package installed.
    from wiggle_render import RenderError, render  # type: ignore[import-not-found, unused-ignore]

    try:
        data: bytes = render(flow.graph, "svg")
    except RenderError as exc:
        return {"error": str(exc)}
    return {"svg": data.decode("utf-8"), "name": flow.name, "version": flow.version}
