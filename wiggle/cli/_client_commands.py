"""`wiggle deploy`, `start`, `signal` and `cancel`: the commands that change what a server holds."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from wiggle.cli._options import add_connection_flags, add_json_flag, flag, make_client, parse_json
from wiggle.cli._output import dump
from wiggle.cli._repair_commands import add_bulk_flags, bulk_or_single
from wiggle.errors import Diagnostic, FlowError, InvalidRequest

if TYPE_CHECKING:
    from wiggle.client import Client
    from wiggle.compiler import CompiledFlow, SubflowRef

__all__ = ["register"]


def _compile_all(paths: list[str]) -> list[tuple[str, CompiledFlow, list[SubflowRef]]]:
    """Every file compiled, or one FlowError with every problem of every file."""
    from wiggle.compiler import load_flow_file, subflow_references

    flows = []
    problems: list[Diagnostic] = []
    for path in paths:
        try:
            flows.append((path, load_flow_file(path), subflow_references(path)))
        except FlowError as exc:
            problems.extend(exc.diagnostics)
    if problems:
        raise FlowError(problems)
    return flows


def _check_subflows(
    client: Client, flows: list[tuple[str, CompiledFlow, list[SubflowRef]]]
) -> None:
    """Every subflow target is in this deploy or registered already (FlowError otherwise)."""
    here: dict[str, set[str]] = {}
    for _, flow, _ in flows:
        here.setdefault(flow.name, set()).add(flow.version)
    registered: dict[str, set[str]] = {}
    problems = []
    for _, _, refs in flows:
        for ref in refs:
            versions = here.get(ref.flow, set())
            if ref.flow not in registered:
                registered[ref.flow] = {d.version for d in client.list_definitions(ref.flow)}
            versions = versions | registered[ref.flow]
            if ref.version is None and versions:
                continue
            if ref.version is not None and ref.version in versions:
                continue
            pinned = f" at version {ref.version}" if ref.version else ""
            problems.append(
                Diagnostic(
                    ref.file,
                    ref.line,
                    ref.column,
                    f"subflow target {ref.flow!r}{pinned} is neither registered on the server "
                    "nor in this deploy; deploy it first, or list its file in the same deploy",
                )
            )
    if problems:
        raise FlowError(problems)


def _in_order(
    flows: list[tuple[str, CompiledFlow, list[SubflowRef]]],
) -> list[tuple[str, CompiledFlow]]:
    """Subflow targets before the flows that start them (as given otherwise)."""
    by_name: dict[str, list[int]] = {}
    for i, (_, flow, _) in enumerate(flows):
        by_name.setdefault(flow.name, []).append(i)
    done: list[int] = []
    visiting: set[int] = set()

    def visit(i: int) -> None:
        if i in done or i in visiting:
            return  # a cycle (a flow starting itself) needs no order
        visiting.add(i)
        for ref in flows[i][2]:
            for j in by_name.get(ref.flow, []):
                visit(j)
        visiting.discard(i)
        done.append(i)

    for i in range(len(flows)):
        visit(i)
    return [(flows[i][0], flows[i][1]) for i in done]


def _deploy(args: argparse.Namespace) -> int:
    flows = _compile_all(args.flows)  # nothing is deployed when one is broken
    results = []
    with make_client(args) as client:
        _check_subflows(client, flows)
        for path, flow in _in_order(flows):
            deployed = client.deploy(flow)
            results.append({"file": path, **asdict(deployed)})
            if not args.json:
                state = "deployed" if deployed.created else "unchanged"
                print(f"{deployed.name} {deployed.version} {state}")
    if args.json:
        print(dump(results))
    return 0


def _start(args: argparse.Namespace) -> int:
    value = parse_json(args.input, "--input")
    if args.count != 1:
        return _start_many(args, value)
    with make_client(args) as client:
        started = client.start(
            args.flow,
            value,
            version=args.version,
            instance_id=args.id,
            traceparent=args.traceparent,
            tracestate=args.tracestate,
        )
        if not args.wait:
            print(dump(asdict(started)) if args.json else started.instance_id)
            return 0
        view = client.wait(started.instance_id, timeout=args.timeout or None)
    if args.json:
        print(
            dump({"instance_id": view.instance_id, "status": view.status, "context": view.context})
        )
    else:
        reason = f" ({view.reason})" if view.reason else ""
        print(f"{view.instance_id} {view.status}{reason}")
        print(dump(view.context))
    return 0 if view.status == "COMPLETED" else 1


def _start_many(args: argparse.Namespace, value: Any) -> int:
    """`--count N`: N instances with the same input, in one connection; `{n}` in --id is 1..N."""
    if args.count < 1:
        raise InvalidRequest(f"--count must be at least 1, not {args.count}")
    if args.wait:
        raise InvalidRequest("--wait waits for one instance: use it without --count")
    if args.id and "{n}" not in args.id:
        raise InvalidRequest(
            f"--count {args.count} with --id {args.id!r} would start one id {args.count} times:"
            " put {n} in the id (--id 'order-{n}'), numbered from 1"
        )
    started = []
    with make_client(args) as client:
        for n in range(1, args.count + 1):
            ident = args.id.replace("{n}", str(n)) if args.id else None
            one = client.start(
                args.flow,
                value,
                version=args.version,
                instance_id=ident,
                traceparent=args.traceparent,
                tracestate=args.tracestate,
            )
            started.append(one)
            if not args.json:
                print(one.instance_id, flush=True)
    if args.json:
        print(dump({"started": [asdict(one) for one in started]}))
    return 0


def _signal(args: argparse.Namespace) -> int:
    payload = parse_json(args.payload, "--payload") if args.payload is not None else None
    targets = [t for t in (args.instance_id, args.name) if t]
    if args.filter:
        if len(targets) != 1:
            raise InvalidRequest("wiggle signal --filter COND NAME: give the signal name only")
        name, iid = targets[0], ""
    else:
        if len(targets) != 2:
            raise InvalidRequest("wiggle signal ID NAME: give the instance id and signal name")
        iid, name = targets

    def single(client: Client) -> int:
        delivered = client.signal(iid, name, payload)
        if args.json:
            print(dump({"delivered": delivered}))
        else:
            print("delivered" if delivered else "buffered (its await has not been reached yet)")
        return 0

    return bulk_or_single(args, "signal", {"name": name, "payload": payload}, single)


def _cancel(args: argparse.Namespace) -> int:
    if bool(args.filter) == bool(args.instance_id):
        raise InvalidRequest("wiggle cancel: give an instance id, or --filter COND (not both)")

    def single(client: Client) -> int:
        status = client.cancel(args.instance_id, args.reason or "")
        print(dump({"status": status}) if args.json else status)
        return 0

    return bulk_or_single(args, "cancel", {"reason": args.reason or ""}, single)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "deploy",
        help="register flows with a server",
        description="Compile every FLOW, check that each subflow target is registered or in "
        "this deploy, then register them (subflow targets first). Nothing is registered when "
        "one is refused.",
    )
    p.add_argument("flows", nargs="+", metavar="FLOW", help="flow files (YAML or JSON)")
    add_json_flag(p)
    add_connection_flags(p)
    p.set_defaults(handler=_deploy)

    p = subparsers.add_parser("start", help="start an instance of a deployed flow")
    p.add_argument("flow", metavar="FLOW_NAME")
    flag(p, "--input", env="WIGGLE_INPUT", default="null", help="the input, JSON or @FILE")
    flag(
        p,
        "--traceparent",
        env="WIGGLE_TRACEPARENT",
        help="a W3C traceparent the instance's trace continues (docs/observability.md); the "
        "server ignores a malformed one",
    )
    flag(p, "--tracestate", env="WIGGLE_TRACESTATE", help="the W3C tracestate going with it")

    flag(p, "--version", env="WIGGLE_VERSION", help="pin a version")
    flag(
        p,
        "--id",
        env="WIGGLE_INSTANCE_ID",
        help="instance id (the same flow and input again is a no-op; another flow or input "
        "with that id is refused); with --count, {n} in it is the instance's number, from 1",
    )
    flag(
        p,
        "--count",
        env="WIGGLE_COUNT",
        type=int,
        default=1,
        help="start this many instances with the same input, one id per line (--json: one "
        "document); the same command again starts nothing new when --id numbers them",
    )
    flag(
        p,
        "--wait",
        env="WIGGLE_WAIT",
        action="store_true",
        help="wait until it finishes; exit 0 only when COMPLETED",
    )
    flag(
        p,
        "--timeout",
        env="WIGGLE_WAIT_TIMEOUT",
        type=float,
        help="give up waiting after this many seconds (0: never)",
    )
    add_json_flag(p)
    add_connection_flags(p)
    p.set_defaults(handler=_start)

    p = subparsers.add_parser(
        "signal",
        help="send a signal to an instance (or many, by --filter)",
        description="Send signal NAME to instance ID with an optional JSON payload. A name no "
        "await of the instance's flow takes is refused. With --filter COND NAME, a bulk signal "
        "(preview first, --yes to run).",
    )
    p.add_argument("instance_id", metavar="ID", nargs="?")
    p.add_argument("name", metavar="NAME", nargs="?")
    flag(p, "--payload", env="WIGGLE_PAYLOAD", help="JSON or @FILE")
    add_bulk_flags(p)
    add_json_flag(p)
    add_connection_flags(p)
    p.set_defaults(handler=_signal)

    p = subparsers.add_parser(
        "cancel",
        help="cancel an instance (or many, by --filter)",
        description="Cancel instance ID: its steps, timers and children end; it keeps the "
        "context it had reached. With --filter, a bulk cancel (preview first, --yes to run).",
    )
    p.add_argument("instance_id", metavar="ID", nargs="?")
    flag(p, "--reason", env="WIGGLE_REASON", help="recorded with the cancellation")
    add_bulk_flags(p)
    add_json_flag(p)
    add_connection_flags(p)
    p.set_defaults(handler=_cancel)
