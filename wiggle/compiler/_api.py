"""The compiler's entry points: text → CompiledFlow, or a FlowError listing every problem."""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass, field
from typing import Any

from wiggle.compiler._canonical import canonical_json, version_of
from wiggle.compiler._checks import DOCUMENT_CHECKS, GRAPH_CHECKS, duplicate_ids
from wiggle.compiler._compile import Claim, Compiled, compile_flow
from wiggle.compiler._graph import graph_problems, graph_to_nx
from wiggle.compiler._loader import MAX_BYTES, SourceMap, load_document
from wiggle.compiler._messages import schema_diagnostics
from wiggle.compiler._schema import flow_validator
from wiggle.errors import Diagnostic, FlowError
from wiggle.graph import Graph

__all__ = [
    "CompiledFlow",
    "FlowAnalysis",
    "analyse_flow",
    "graph_from_canonical",
    "load_flow",
    "load_flow_file",
]


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


@dataclass(frozen=True)
class FlowAnalysis:
    """Everything one pass over a flow's text found, problems or not: what an editor needs
    (`wiggle lsp`) besides the verdict `load_flow` gives."""

    problems: tuple[Diagnostic, ...]  # in source order, exactly those `load_flow` raises
    document: Any  # the data read (None when the text is not a YAML or JSON document)
    source: SourceMap | None  # where each value was written (None with `document`)
    sites: tuple[Claim, ...] = ()  # which value named each node id (once it compiled)
    compiled: Compiled | None = field(default=None, repr=False)

    @functools.cached_property
    def flow(self) -> CompiledFlow | None:
        """The compiled flow with its version, None when there is a problem. Hashed on first
        use: a check that only wants the problems does not pay for the canonical bytes."""
        if self.problems or self.compiled is None:
            return None
        return _finish(self.compiled.document, self.compiled.nx)


def analyse_flow(
    source: str | bytes, filename: str = "<flow>", *, max_bytes: int = MAX_BYTES
) -> FlowAnalysis:
    """Load, validate and compile one flow document (YAML or JSON), never raising FlowError."""
    try:
        loaded = load_document(source, filename, max_bytes=max_bytes)
    except FlowError as exc:
        return FlowAnalysis(exc.diagnostics, None, None)
    flow, where = loaded.value, loaded.source
    problems = schema_diagnostics(flow_validator(), flow, where)
    if isinstance(flow, dict):
        for doc_check in DOCUMENT_CHECKS:
            problems.extend(doc_check(flow, where))
    if problems:
        # One pass reports everything: duplicate ids too, when the steps can be numbered.
        problems.extend(duplicate_ids(flow, where))
        return FlowAnalysis(tuple(sorted(problems)), flow, where)
    compiled = compile_flow(flow)
    for graph_check in GRAPH_CHECKS:
        found = list(graph_check(compiled, where))
        problems.extend(found)
        if found:
            break  # after an id clash the wiring is not what the user meant: say no more
    return FlowAnalysis(tuple(sorted(problems)), flow, where, tuple(compiled.claims), compiled)


def load_flow(
    source: str | bytes, filename: str = "<flow>", *, max_bytes: int = MAX_BYTES
) -> CompiledFlow:
    """Load, validate and compile one flow document (YAML or JSON); raise FlowError."""
    analysis = analyse_flow(source, filename, max_bytes=max_bytes)
    if analysis.flow is None:
        raise FlowError(analysis.problems)
    return analysis.flow


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
