"""Running Graphviz: DOT text in, SVG / PNG / PDF bytes out, with clear errors around `dot`."""

from __future__ import annotations

import os
import shutil
from pathlib import PurePath

import graphviz

from wiggle.errors import WiggleError
from wiggle.graph import Graph

from ._diagram import CoverageMarks, to_dot
from ._states import InstanceStates

__all__ = ["FORMATS", "GraphvizNotFound", "RenderError", "ensure_dot", "format_for_path", "render"]

#: Output formats by name; "dot" is the DOT text itself and needs no Graphviz install.
FORMATS = ("svg", "png", "pdf", "dot")

_INSTALL_HINT = "Graphviz `dot` not found; install it with apt-get install graphviz"


class RenderError(WiggleError):
    """A diagram could not be produced (bad format, or Graphviz failed)."""


class GraphvizNotFound(RenderError):
    """The `dot` executable of Graphviz is not on PATH."""

    def __init__(self) -> None:
        super().__init__(f"{_INSTALL_HINT} (or brew install graphviz)")


def ensure_dot() -> str:
    """The path of Graphviz's `dot`; GraphvizNotFound when it is not installed."""
    path = shutil.which("dot")
    if path is None:
        raise GraphvizNotFound()
    return path


def format_for_path(path: str | os.PathLike[str]) -> str:
    """The output format named by the file suffix (`.svg`, `.png`, `.pdf`, `.dot`)."""
    suffix = PurePath(path).suffix.lower().lstrip(".")
    if suffix == "gv":  # Graphviz's other customary suffix for DOT text
        suffix = "dot"
    if suffix not in FORMATS:
        shown = f"suffix .{suffix}" if suffix else "no suffix"
        raise RenderError(
            f"cannot tell the output format of {os.fspath(path)!r} ({shown}); "
            "use .svg, .png, .pdf or .dot"
        )
    return suffix


def render(
    graph: Graph,
    fmt: str,
    *,
    instance: InstanceStates | None = None,
    caption: str = "",
    coverage: CoverageMarks | None = None,
) -> bytes:
    """The diagram of `graph` in `fmt` (one of FORMATS), optionally highlighting `instance` or
    marking what `coverage` did not take, with an optional `caption` under the title."""
    if fmt not in FORMATS:
        raise RenderError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    source = to_dot(graph, instance=instance, caption=caption, coverage=coverage)
    if fmt == "dot":
        return source.encode()
    ensure_dot()
    try:
        data: bytes = graphviz.pipe("dot", fmt, source.encode(), quiet=True)
    except graphviz.ExecutableNotFound as exc:  # removed between the check and the run
        raise GraphvizNotFound() from exc
    except graphviz.CalledProcessError as exc:
        stderr = exc.stderr.decode(errors="replace").strip() if exc.stderr else ""
        raise RenderError(f"Graphviz failed to render {graph.name!r}: {stderr or exc}") from exc
    return data
