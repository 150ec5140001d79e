"""`wiggle lsp`: the language server, over stdio, for editors (docs/editors.md)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["register"]

INSTALL_HINT = (
    "wiggle lsp needs the language server packages (pygls, lsprotocol), which are optional: "
    "install them with  pip install 'wiggle[lsp]'  (in this checkout: bash scripts/setup.sh, "
    "or .venv/bin/pip install -e '.[lsp]')"
)


def _lsp(args: argparse.Namespace) -> int:
    try:
        import lsprotocol  # noqa: F401
        import pygls  # noqa: F401
    except ImportError as exc:
        print(f"wiggle lsp: {exc}", file=sys.stderr)
        print(f"wiggle lsp: {INSTALL_HINT}", file=sys.stderr)
        return 1
    from wiggle.lsp import serve

    return serve()


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "lsp",
        help="a Language Server over stdio for flows, scenario files and schedules (editors)",
        description="Serve the Language Server Protocol on stdin and stdout to one editor: "
        "diagnostics from the compiler as you type, completion of keys, activities, queues, "
        "signals and node ids, hover, go to definition (a step's handler in Python, Go, Java "
        "or TypeScript; a subflow's file), references, the outline, a code lens with the "
        "flow's version (and with a server address, whether it is deployed and how many live "
        "instances run older versions), and the picture of `wiggle render`. Editors start it "
        "themselves: docs/editors.md shows VS Code, Neovim and any LSP client. Needs the "
        "optional packages: pip install 'wiggle[lsp]'. Settings come from the client "
        "(initializationOptions: address, tokenFile, debounceMs, unregisteredActivities), else "
        "the WIGGLE_* connection variables; WIGGLE_LSP_LOG=INFO logs each check to stderr.",
    )
    p.set_defaults(handler=_lsp)
