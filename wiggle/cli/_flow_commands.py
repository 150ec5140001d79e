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

from wiggle.cli._options import add_connection_flags
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


class _Usage(Exception):
    """A bad render command line: exit status 2 with this message."""


def _read_states(path: str, graph: Any) -> dict[str, Any]:
    """A JSON object: node id -> state, or node id -> {state: token count}. Every node id must
    be in the flow and every state one the renderer draws."""
    from wiggle_render import STATES  # type: ignore[import-not-found, unused-ignore]

    try:
        with open(path, "rb") as handle:
            states: Any = json.loads(handle.read())
    except (OSError, ValueError) as exc:
        raise _Usage(
            f"cannot use --states {path}: {getattr(exc, 'strerror', None) or exc}"
        ) from None
    valid = isinstance(states, dict) and all(
        isinstance(v, str) or (isinstance(v, dict) and all(isinstance(n, int) for n in v.values()))
        for v in states.values()
    )
    if not valid:
        raise _Usage(
            f"cannot use --states {path}: expected an object of node id -> state or "
            "{state: count}"
        )
    unknown_ids = sorted(k for k in states if k not in graph.nodes)
    named = [v for v in states.values() if isinstance(v, str)]
    named += [k for v in states.values() if isinstance(v, dict) for k in v]
    unknown_states = sorted({v for v in named if v.upper() not in STATES})
    problems = []
    if unknown_ids:
        problems.append(f"no node {', '.join(map(repr, unknown_ids[:10]))} in flow {graph.name!r}")
    if unknown_states:
        problems.append(
            f"unknown state {', '.join(map(repr, unknown_states[:10]))} (use {', '.join(STATES)})"
        )
    if problems:
        raise _Usage(f"cannot use --states {path}: " + "; ".join(problems))
    return dict(states)


def _coverage_marks(path: str, graph: Any) -> tuple[Any, str]:
    """What a `wiggle test --coverage` report says the scenarios took of `graph`, and a caption;
    the report must be of this very version of the flow."""
    from wiggle_render import CoverageMarks  # type: ignore[import-not-found, unused-ignore]

    from wiggle.testing._coverage import read_coverage

    try:
        covered = read_coverage(path, graph.name)
    except ValueError as exc:
        raise _Usage(f"cannot use --coverage {path}: {exc}") from None
    if covered.get("version") != graph.version:
        raise _Usage(
            f"cannot use --coverage {path}: it covers version {covered.get('version')} of "
            f"{graph.name!r}, the flow is {graph.version}; run `wiggle test --coverage` again"
        )
    taken = frozenset(k for k, n in (covered.get("edges") or {}).items() if n)
    visited = frozenset(k for k, n in (covered.get("nodes") or {}).items() if n)
    caption = (
        f"coverage: {covered.get('edges_taken')}/{covered.get('edges_total')} edges taken"
        f" ({covered.get('percent')}%); untaken edges red and dashed"
    )
    return CoverageMarks(taken, visited), caption


def _instance_picture(args: argparse.Namespace) -> tuple[Any, dict[str, dict[str, int]]]:
    """The graph of instance --instance and its node states, from the server: the overlay of
    wiggle.overlay, the same the console draws (docs/console.md)."""
    from wiggle_render import states_from_instance  # type: ignore[import-not-found, unused-ignore]

    from wiggle.cli._options import make_client
    from wiggle.graph import Graph

    with make_client(args) as client:
        view = client.describe(args.instance, events=True)
        definition = client.get_definition(view.flow, view.version)
    graph = Graph.from_json(definition.graph, definition.version)
    states: dict[str, dict[str, int]] = states_from_instance(graph, view)
    return graph, states


def _output_path(args: argparse.Namespace, fmt: str) -> str:
    """-o, else beside the flow (`flow.yaml` -> `flow.svg`), else `<instance id>.svg` here."""
    if args.output:
        return str(args.output)
    if args.instance:
        return f"{args.instance}.{fmt}"
    if args.diff:
        return f"{os.path.splitext(os.path.basename(args.diff[1]))[0]}-diff.{fmt}"
    if args.flow == _STDIN:
        raise _Usage("reading the flow from stdin (-) needs -o")
    return f"{os.path.splitext(args.flow)[0]}.{fmt}"


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
        if sum(x is not None for x in (args.flow, args.instance, args.diff)) != 1:
            raise _Usage("give a FLOW file, --instance ID or --diff OLD NEW (one of them)")
        if args.instance and args.states:
            raise _Usage("--states is for a FLOW file; --instance reads the states itself")
        if args.coverage and (args.instance or args.diff or args.states):
            raise _Usage("--coverage is for a FLOW file, without --states")
        if args.format:
            fmt = args.format.lower()
            if fmt not in FORMATS:  # from WIGGLE_RENDER_FORMAT: argparse checks only the flag
                raise RenderError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
        elif args.output == _STDIN:
            raise RenderError("writing to stdout (-o -) needs --format")
        elif args.output:
            fmt = format_for_path(args.output)
        else:
            fmt = "svg"
        output = _output_path(args, fmt)
    except (RenderError, _Usage) as exc:
        print(f"wiggle render: {exc}", file=sys.stderr)
        return 2
    states: Any = None
    marks: Any = None
    caption = ""
    if args.instance:
        graph, states = _instance_picture(args)  # WiggleErrors: reported by main
    elif args.diff:
        from wiggle.cli._migrate_commands import diff_picture

        graph, states, caption = diff_picture(args)  # WiggleErrors: reported by main
    else:
        try:
            graph = _load(args.flow).graph
        except FlowError as exc:
            _report(exc)
            return 1
        try:
            if args.states:
                states = _read_states(args.states, graph)
            if args.coverage:
                marks, caption = _coverage_marks(args.coverage, graph)
        except _Usage as exc:
            print(f"wiggle render: {exc}", file=sys.stderr)
            return 2
    try:
        data = render(graph, fmt, instance=states, caption=caption, coverage=marks)
    except RenderError as exc:
        print(f"wiggle render: {exc}", file=sys.stderr)
        return 1
    if output == _STDIN:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        return 0
    try:
        with open(output, "wb") as handle:
            handle.write(data)
    except OSError as exc:
        print(f"wiggle render: cannot write {output}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    if not args.output:
        print(output)  # written where the user did not name: say where
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
        help="draw a flow, or a live instance, with Graphviz (.svg, .png, .pdf or .dot)",
        description="Draw FLOW, or instance ID as the server holds it (its token states over "
        "its graph). Without -o the picture is written beside the flow (flow.yaml -> flow.svg) "
        "or, for an instance, to ID.svg here, and the path is printed. The format follows the "
        "output's suffix unless --format is given.",
    )
    render.add_argument("flow", nargs="?", metavar="FLOW", help="flow file (YAML or JSON), or -")
    render.add_argument("-o", "--output", metavar="OUT", help="output file, or - for stdout")
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
    render.add_argument(
        "--coverage",
        metavar="REPORT",
        help="mark the edges no scenario took, from the report of `wiggle test --coverage`",
    )
    render.add_argument(
        "--instance",
        metavar="ID",
        help="draw this instance from the server (--address ...), its token states overlaid",
    )
    render.add_argument(
        "--diff",
        nargs=2,
        metavar=("OLD", "NEW"),
        help="draw NEW with what changed since OLD marked (added, changed, moved, kind changed; "
        "removed nodes named under the title); files, or deployed NAME@VERSION",
    )
    add_connection_flags(render)
    render.set_defaults(handler=_render)
