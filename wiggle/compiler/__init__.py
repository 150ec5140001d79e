"""Flow text → diagnostics, or the canonical graph and its version (docs/graph.md).

    load_flow / load_flow_file   YAML or JSON → CompiledFlow (raises FlowError with every problem)
    analyse_flow                 the same pass without raising: the problems, the data read, where
                                 each value was written and which value named each node (editors)
    flow_schema                  the flow format's JSON Schema (spec/schema/flow.schema.json)
    graph_from_canonical         stored canonical graph bytes → CompiledFlow (checked)
    canonical_json               RFC 8785 bytes of JSON data
    subflow_references           the flows a flow file's `subflow` steps start, located

The stages, each a private module: `_loader` (text → data + positions, hostile input refused),
`_schema` + `_messages` (flow.schema.json and readable errors), `_checks` (semantic checks),
`_compile` (the graph; `_graph` for networkx and stored graphs), `_canonical` (JCS, the hash).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wiggle._lazy import lazy_getattr

if TYPE_CHECKING:
    from wiggle.compiler._api import (
        CompiledFlow,
        FlowAnalysis,
        analyse_flow,
        graph_from_canonical,
        load_flow,
        load_flow_file,
    )
    from wiggle.compiler._canonical import canonical_json
    from wiggle.compiler._compile import Claim as NodeClaim
    from wiggle.compiler._durations import parse_duration
    from wiggle.compiler._loader import MAX_BYTES, SourceMap, load_document
    from wiggle.compiler._loader import Path as DocumentPath
    from wiggle.compiler._messages import schema_diagnostics
    from wiggle.compiler._references import SubflowRef, subflow_references
    from wiggle.compiler._schema import flow_schema

# Each name is imported on first use: the engine needs only canonical JSON and durations to
# start, and the whole compiler (networkx, jsonschema, the YAML reader) was a fifth of a
# server's start. A server compiles on its first deploy.
__getattr__ = lazy_getattr(
    __name__,
    {
        "CompiledFlow": "wiggle.compiler._api",
        "FlowAnalysis": "wiggle.compiler._api",
        "analyse_flow": "wiggle.compiler._api",
        "graph_from_canonical": "wiggle.compiler._api",
        "load_flow": "wiggle.compiler._api",
        "load_flow_file": "wiggle.compiler._api",
        "canonical_json": "wiggle.compiler._canonical",
        "NodeClaim": "wiggle.compiler._compile:Claim",
        "parse_duration": "wiggle.compiler._durations",
        "MAX_BYTES": "wiggle.compiler._loader",
        "SourceMap": "wiggle.compiler._loader",
        "load_document": "wiggle.compiler._loader",
        "DocumentPath": "wiggle.compiler._loader:Path",
        "schema_diagnostics": "wiggle.compiler._messages",
        "SubflowRef": "wiggle.compiler._references",
        "subflow_references": "wiggle.compiler._references",
        "flow_schema": "wiggle.compiler._schema",
    },
)

__all__ = [
    "MAX_BYTES",
    "CompiledFlow",
    "DocumentPath",
    "FlowAnalysis",
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
