"""The compiler's entry points: text → CompiledFlow, or a FlowError listing every problem."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from wiggle.compiler._canonical import canonical_json, version_of
from wiggle.compiler._checks import DOCUMENT_CHECKS, GRAPH_CHECKS, duplicate_ids
from wiggle.compiler._compile import compile_flow
from wiggle.compiler._graph import graph_problems, graph_to_nx
from wiggle.compiler._loader import MAX_BYTES, SourceMap, load_document
from wiggle.compiler._messages import schema_diagnostics
from wiggle.compiler._schema import flow_validator
from wiggle.errors import Diagnostic, FlowError
from wiggle.graph import Graph

__all__ = ["CompiledFlow", "graph_from_canonical", "load_flow", "load_flow_file"]


@dataclass(frozen=True)
class CompiledFlow:
    """A compiled flow: its canonical bytes, their version, and the graph in three forms."""

    name: str
    version: str  # "sha256:<64 hex>"
    canonical: bytes  # the hashed bytes
    document: dict[str, Any]  # the canonical graph as JSON data
    graph: Graph
    nx: Any  # networkx.DiGraph: nodes carry the node dicts, edges a "label"


def _finish(document: dict[str, Any], nx_graph: Any) -> CompiledFlow:
    canonical = canonical_json(document)
    version = version_of(canonical)
    return CompiledFlow(
        name=document["name"],
        version=version,
        canonical=canonical,
        document=document,
        graph=Graph.from_json(document, version),
        nx=nx_graph,
    )


def load_flow(
    source: str | bytes, filename: str = "<flow>", *, max_bytes: int = MAX_BYTES
) -> CompiledFlow:
    """Load, validate and compile one flow document (YAML or JSON); raise FlowError."""
    loaded = load_document(source, filename, max_bytes=max_bytes)
    flow, where = loaded.value, loaded.source
    problems = schema_diagnostics(flow_validator(), flow, where)
    if isinstance(flow, dict):
        for doc_check in DOCUMENT_CHECKS:
            problems.extend(doc_check(flow, where))
    if problems:
        # One pass reports everything: duplicate ids too, when the steps can be numbered.
        problems.extend(duplicate_ids(flow, where))
        raise FlowError(problems)
    compiled = compile_flow(flow)
    for graph_check in GRAPH_CHECKS:
        found = list(graph_check(compiled, where))
        problems.extend(found)
        if found:
            break  # after an id clash the wiring is not what the user meant: say no more
    if problems:
        raise FlowError(problems)
    return _finish(compiled.document, compiled.nx)


def load_flow_file(path: str | os.PathLike[str], *, max_bytes: int = MAX_BYTES) -> CompiledFlow:
    """`load_flow` on a file, refusing oversized files before reading them."""
    name = os.fspath(path)
    try:
        size = os.path.getsize(name)
        if size > max_bytes:
            raise FlowError(
                [
                    Diagnostic(
                        name, 1, 1, f"document is {size} bytes; the limit is {max_bytes} bytes"
                    )
                ]
            )
        with open(name, "rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        raise FlowError([Diagnostic(name, 1, 1, f"cannot read the flow: {exc.strerror}")]) from None
    return load_flow(data, name, max_bytes=max_bytes)


def graph_from_canonical(doc: bytes) -> CompiledFlow:
    """Rebuild a CompiledFlow from stored canonical graph bytes, checking them first.

    The version is the hash of the document re-serialised canonically, so bytes that a store
    handed back reformatted (PostgreSQL JSONB reorders keys) still yield the original version.
    """
    where = SourceMap("<graph>")
    try:
        document = json.loads(doc)
        problems = graph_problems(document, where)
        if problems:
            raise FlowError(problems)
        return _finish(document, graph_to_nx(document))
    except (ValueError, UnicodeDecodeError) as exc:
        raise FlowError([Diagnostic("<graph>", 1, 1, f"graph is not JSON: {exc}")]) from None
    except RecursionError:
        raise FlowError([Diagnostic("<graph>", 1, 1, "graph is nested too deeply")]) from None
