"""`wiggle validate`, `wiggle hash`, `wiggle compile` and `wiggle render`: one flow file at a time.

Every problem with a flow is reported as `FILE:LINE:COL: message` on stderr and exit status 1; a
bad command line (an output suffix we cannot render) is exit status 2, like argparse's own usage
errors. A FLOW of `-` reads the document from stdin.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Any

from wiggle.errors import Diagnostic, FlowError

if TYPE_CHECKING:
    from wiggle.compiler import CompiledFlow

__all__ = ["register"]

_TRUE = frozenset({"1", "true", "yes", "on"})
_STDIN = "-"


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUE


def _load(path: str) -> CompiledFlow:
    """Compile one flow file; FlowError (with a located diagnostic) for anything unreadable."""
    # Imported here so `wiggle --help` and the other command groups do not pay for the compiler.
    from wiggle.compiler import load_flow, load_flow_file

    try:
        if path == _STDIN:
            return load_flow(sys.stdin.buffer.read(), "<stdin>")
        return load_flow_file(path)
    except OSError as exc:  # the compiler reports these itself; this is the belt to its braces
        reason = exc.strerror or str(exc)
        raise FlowError([Diagnostic(path, 1, 1, f"cannot read the flow: {reason}")]) from None


def _report(error: FlowError) -> None:
    for diagnostic in error.diagnostics:
        print(diagnostic, file=sys.stderr)


def _validate(args: argparse.Namespace) -> int:
    failed = False
    for path in args.flows:
        try:
            flow = _load(path)
        except FlowError as exc:
            _report(exc)
            failed = True
            continue
        if not args.quiet:
            print(f"{path}: ok ({flow.name} {flow.version})")
    return 1 if failed else 0


def _hash(args: argparse.Namespace) -> int:
    try:
        flow = _load(args.flow)
    except FlowError as exc:
        _report(exc)
        return 1
    print(flow.version)
    return 0


def _compile(args: argparse.Namespace) -> int:
    try:
        flow = _load(args.flow)
    except FlowError as exc:
        _report(exc)
        return 1
    if args.pretty:
        text = json.dumps(flow.document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        sys.stdout.write(text)
    else:
        sys.stdout.flush()
        sys.stdout.buffer.write(flow.canonical + b"\n")
    return 0


def _read_states(path: str) -> dict[str, Any]:
    """A JSON object: node id -> state, or node id -> {state: token count}."""
    with open(path, "rb") as handle:
        states: Any = json.loads(handle.read())
    valid = isinstance(states, dict) and all(
        isinstance(v, str) or (isinstance(v, dict) and all(isinstance(n, int) for n in v.values()))
        for v in states.values()
    )
    if not valid:
        raise ValueError("expected an object of node id -> state or {state: count}")
    return dict(states)


def _render(args: argparse.Namespace) -> int:
    # mypy cannot follow setuptools' editable mapping of wiggle_render onto tools/render, so
    # `mypy wiggle` sees no such module; with the package on MYPYPATH the ignore is unused.
    from wiggle_render import (  # type: ignore[import-not-found, unused-ignore]
        FORMATS,
        RenderError,
        format_for_path,
        render,
    )

    try:
        if args.format:
            fmt = args.format.lower()
            if fmt not in FORMATS:  # from WIGGLE_RENDER_FORMAT: argparse checks only the flag
                raise RenderError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
        elif args.output == _STDIN:
            raise RenderError("writing to stdout (-o -) needs --format")
        else:
            fmt = format_for_path(args.output)
    except RenderError as exc:
        print(f"wiggle render: {exc}", file=sys.stderr)
        return 2
    states = None
    if args.states:
        try:
            states = _read_states(args.states)
        except (OSError, ValueError) as exc:
            print(f"wiggle render: cannot use --states {args.states}: {exc}", file=sys.stderr)
            return 2
    try:
        flow = _load(args.flow)
    except FlowError as exc:
        _report(exc)
        return 1
    try:
        data = render(flow.graph, fmt, instance=states)
    except RenderError as exc:
        print(f"wiggle render: {exc}", file=sys.stderr)
        return 1
    if args.output == _STDIN:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        return 0
    try:
        with open(args.output, "wb") as handle:
            handle.write(data)
    except OSError as exc:
        print(f"wiggle render: cannot write {args.output}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0


def register(subparsers: Any) -> None:
    """Add validate, hash, compile and render to the `wiggle` command."""
    validate = subparsers.add_parser(
        "validate",
        help="check flow documents; one FILE:LINE:COL: message per problem",
        description="Check each FLOW against the schema and the semantic rules. Exit status 0 "
        "when all are valid, else 1 with every problem on stderr.",
    )
    validate.add_argument("flows", nargs="+", metavar="FLOW", help="flow file (YAML or JSON), or -")
    validate.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        default=_env_flag("WIGGLE_QUIET"),
        help="print nothing for valid flows (env WIGGLE_QUIET)",
    )
    validate.set_defaults(handler=_validate)

    hash_ = subparsers.add_parser(
        "hash", help="print a flow's version, sha256:<hex> of its canonical graph"
    )
    hash_.add_argument("flow", metavar="FLOW", help="flow file (YAML or JSON), or -")
    hash_.set_defaults(handler=_hash)

    compile_ = subparsers.add_parser(
        "compile", help="print a flow's canonical graph (RFC 8785 JSON)"
    )
    compile_.add_argument("flow", metavar="FLOW", help="flow file (YAML or JSON), or -")
    compile_.add_argument(
        "--pretty",
        action="store_true",
        default=_env_flag("WIGGLE_PRETTY"),
        help="indent for reading; not the hashed bytes (env WIGGLE_PRETTY)",
    )
    compile_.set_defaults(handler=_compile)

    render = subparsers.add_parser(
        "render",
        help="draw a flow with Graphviz (.svg, .png, .pdf or .dot)",
        description="Draw FLOW to OUT; the format follows OUT's suffix unless --format is given.",
    )
    render.add_argument("flow", metavar="FLOW", help="flow file (YAML or JSON), or -")
    render.add_argument("-o", "--output", required=True, metavar="OUT", help="output file, or -")
    render.add_argument(
        "-f",
        "--format",
        choices=("svg", "png", "pdf", "dot"),
        default=os.environ.get("WIGGLE_RENDER_FORMAT") or None,
        help="output format, overriding OUT's suffix (env WIGGLE_RENDER_FORMAT)",
    )
    render.add_argument(
        "--states",
        metavar="JSON_FILE",
        help="highlight node states: a JSON object of node id -> state or {state: count}",
    )
    render.set_defaults(handler=_render)
