"""Flow text → diagnostics, or the canonical graph and its version (docs/graph.md).

    load_flow / load_flow_file   YAML or JSON → CompiledFlow (raises FlowError with every problem)
    graph_from_canonical         stored canonical graph bytes → CompiledFlow (checked)
    canonical_json               RFC 8785 bytes of JSON data
    subflow_references           the flows a flow file's `subflow` steps start, located

The stages, each a private module: `_loader` (text → data + positions, hostile input refused),
`_schema` + `_messages` (flow.schema.json and readable errors), `_checks` (semantic checks),
`_compile` (the graph; `_graph` for networkx and stored graphs), `_canonical` (JCS, the hash).
"""

from __future__ import annotations

from wiggle.compiler._api import CompiledFlow, graph_from_canonical, load_flow, load_flow_file
from wiggle.compiler._canonical import canonical_json
from wiggle.compiler._durations import parse_duration
from wiggle.compiler._loader import MAX_BYTES, SourceMap, load_document
from wiggle.compiler._loader import Path as DocumentPath
from wiggle.compiler._messages import schema_diagnostics
from wiggle.compiler._references import SubflowRef, subflow_references

__all__ = [
    "MAX_BYTES",
    "CompiledFlow",
    "DocumentPath",
    "SourceMap",
    "SubflowRef",
    "canonical_json",
    "graph_from_canonical",
    "load_document",
    "load_flow",
    "load_flow_file",
    "parse_duration",
    "schema_diagnostics",
    "subflow_references",
]
