"""`wiggle lsp`: a Language Server for flows, scenario files and schedules (docs/editors.md).

    serve()        the server over stdin/stdout until the client exits (pygls, lsprotocol)
    build_server() the server with every feature wired, not yet started (tests, embedding)

The modules, each one job: `_server` (the wiring), `_documents` (when checks run, the newest
result), `_analysis` (a text → problems, data, positions, the compiled graph), `_diagnostics`,
`_completion` (with `_context`, the cursor's place in text that need not parse, and
`_schemakeys`, what a JSON Schema allows there), `_hover`, `_navigation` (definition and
references), `_symbols`, `_lens` (versions and a server's deployments), `_render`; beneath them
`_index` (the workspace's handlers and flows), `_handlers` (registration calls in Python, Go,
Java and TypeScript), `_flowdoc` (what a flow document names), `_kinds`, `_locate` and `_text`
(positions). pygls and lsprotocol are optional (`pip install 'wiggle[lsp]'`): the names below
load them on first use, and the modules that read text (`_handlers`, `_context`, `_flowdoc`,
`_kinds`, `_schemakeys`) need neither.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from wiggle.lsp._server import WiggleServer, build_server, serve

__all__ = ["WiggleServer", "build_server", "serve"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'wiggle.lsp' has no attribute {name!r}")
    value = getattr(importlib.import_module("wiggle.lsp._server"), name)
    globals()[name] = value
    return value
