"""`wiggle run`: one instance on an embedded engine (wiggle.embedded), handlers in this process.

The engine runs on an SQLite file in a temporary directory (or `--database`), its services
called in this process with no socket, a worker running the handlers; the flows are deployed
and the instance started with eager dispatch to that worker. `--console` opens a loopback port
as well, for the console. Progress is one line per step event; the exit status is 0 only when
the instance COMPLETED.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

import orjson

from wiggle.cli._options import env, env_flag, parse_json
from wiggle.cli._output import EventPrinter
from wiggle.cli._worker_command import load_registry
from wiggle.errors import Diagnostic, FlowError, InvalidRequest

if TYPE_CHECKING:
    from wiggle.compiler import CompiledFlow
    from wiggle.graph import Graph

__all__ = ["register"]

MODES = ("SERVER", "LOCAL_SYNC", "LOCAL_ASYNC")
#: How often the progress lines catch up while the instance runs.
PROGRESS_SLICE_S = 0.25

_MODE_HELP = (
    "run every flow of this run in execution mode M, whatever the flow says "
    "(SERVER, LOCAL_SYNC or LOCAL_ASYNC; env WIGGLE_EXECUTION_MODE). The mode is part of a "
    "flow's version, so the override registers a variant of the flow with its own version hash; "
    "with the default temporary database nothing else sees it"
)


def _compile(path: str, mode: str | None) -> CompiledFlow:
    from wiggle.compiler import canonical_json, graph_from_canonical, load_flow_file

    try:
        flow = load_flow_file(path)
    except OSError as exc:
        raise FlowError([Diagnostic(path, 1, 1, f"cannot read the flow: {exc.strerror}")]) from None
    if mode is None or flow.document.get("execution") == mode:
        return flow
    return graph_from_canonical(canonical_json({**flow.document, "execution": mode}))


def _activities(graphs: list[Graph]) -> set[str]:
    names: set[str] = set()
    for graph in graphs:
        for node in graph:
            for holder in (node, getattr(node, "apply", None)):
                name = getattr(holder, "activity", None)
                if isinstance(name, str) and name:
                    names.add(name)
    return names


def _signals(values: list[str]) -> Iterator[tuple[str, Any]]:
    for value in values:
        name, sep, payload = value.partition("=")
        if not sep or not name:
            raise InvalidRequest(f"--signal {value!r}: expected NAME=JSON")
        yield name, parse_json(payload, f"the payload of --signal {name}")


def _check_signals(signals: list[tuple[str, Any]], graph: Graph) -> None:
    """Refuse, before anything starts, a --signal the flow could never receive."""
    from wiggle.graph import Await

    awaited = sorted({n.signal for n in graph if isinstance(n, Await)})
    for name, _ in signals:
        if name not in awaited:
            takes = "it awaits " + ", ".join(awaited) if awaited else "it has no await"
            raise InvalidRequest(
                f"--signal {name}: flow {graph.name!r} can never receive signal {name!r} ({takes})"
            )


def _run(args: argparse.Namespace) -> int:
    # Check everything the user typed before starting anything.
    value = parse_json(args.input, "--input")
    signals = list(_signals(args.signal or []))
    try:
        flows = [_compile(p, args.mode) for p in [*(args.register or []), args.flow]]
    except FlowError as exc:
        for diagnostic in exc.diagnostics:
            print(diagnostic, file=sys.stderr)
        return 1
    _check_signals(signals, flows[-1].graph)
    registry = load_registry(args.handlers)
    # The worker is only handed tasks whose activity it has: a missing one would wait forever.
    missing = sorted(_activities([f.graph for f in flows]) - set(registry.names()))
    if missing:
        raise InvalidRequest(
            f"{args.handlers} defines no activity named {', '.join(missing)}; the flow needs "
            "every activity it names (write the missing @activity functions first)"
        )

    from wiggle.embedded import Engine
    from wiggle.modes import flow_queues

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    progress = sys.stderr if args.json else sys.stdout
    main = flows[-1]
    with ExitStack() as stack:
        embedded = stack.enter_context(
            Engine(
                args.database,
                activities=registry,
                queues=sorted(flow_queues(flows)),  # the worker here serves them all
                concurrency=args.concurrency,
                default_mode=args.mode or "SERVER",
                # A port only for the console, which reads the node over gRPC.
                listen="127.0.0.1:0" if args.console else None,
            )
        )
        client, worker = embedded.client, embedded.worker
        assert worker is not None
        for flow in flows:
            worker.add_definition(flow.graph)
            client.deploy(flow)
        console_url = ""
        if args.console:
            assert embedded.address is not None
            console_url = _start_console(stack, embedded.address, args.console, args.flow)
        started = client.start(
            main.name, value, version=main.version, instance_id=args.id, worker=worker
        )
        mode_now = client.describe(started.instance_id).execution_mode
        again = "" if started.created else ", resumed"
        print(
            f"{main.name} {main.version}\ninstance {started.instance_id} ({mode_now}{again})",
            file=progress,
            flush=True,
        )
        if console_url:
            print(
                f"console: {console_url}/instances/{started.instance_id}", file=progress, flush=True
            )
        # Buffered by the engine until their await is reached; sent once, by the first run.
        for name, payload in signals if started.created else ():
            client.signal(started.instance_id, name, payload)
        printer = EventPrinter(progress)
        deadline = None if args.timeout is None else time.monotonic() + args.timeout
        while True:
            # WaitInstance answers at once when the instance ends; meanwhile, a progress slice.
            view = client.wait_once(started.instance_id, PROGRESS_SLICE_S, events=True)
            printer.print_new(view.events)
            if view.status.finished:
                break
            if deadline is not None and time.monotonic() > deadline:
                print(f"wiggle: gave up after {args.timeout} s; still RUNNING", file=sys.stderr)
                return 1
        _report(view, args.json)
        if console_url:
            print(
                f"console: still open at {console_url}/ ; Ctrl-C to quit", file=progress, flush=True
            )
            _wait_for_interrupt()
    return 0 if view.status == "COMPLETED" else 1


def _report(view: Any, as_json: bool) -> None:
    reason = f" ({view.reason})" if view.reason else ""
    if as_json:
        if view.status != "COMPLETED":
            print(f"{view.status}{reason}", file=sys.stderr)
        print(orjson.dumps({"status": view.status, "context": view.context}).decode(), flush=True)
    else:
        print(f"{view.status}{reason}")
        print(orjson.dumps(view.context, option=orjson.OPT_INDENT_2).decode(), flush=True)


def _start_console(stack: ExitStack, address: str, listen: str, flow: str) -> str:
    """The console of this run on `listen`, serving on a thread until the run ends; the flow
    file's directory gives the flow pages their descriptions and sample inputs."""
    import dataclasses
    import os

    from wiggle.console import Backend, ConsoleServer, parse_listen, settings_for

    host, port = parse_listen(listen)
    backend = Backend(address)
    stack.callback(backend.close)
    settings = dataclasses.replace(settings_for(host, None), flows_dir=os.path.dirname(flow) or ".")
    console = ConsoleServer(backend, host, port, settings)
    console.start()
    stack.callback(console.stop)
    return console.url


def _wait_for_interrupt() -> None:
    """Block until SIGINT or SIGTERM (the console stays open for a look at the result)."""
    import signal
    import threading

    done = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: done.set())
    try:
        while not done.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)


def _env_list(name: str, separator: str) -> list[str] | None:
    """A repeatable flag's env twin: the entries of `name` split on `separator`."""
    value = env(name)
    return [v for v in value.split(separator) if v.strip()] if value else None


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "run",
        help="run one flow end to end in this process",
        description="Start an embedded engine (SQLite in a temporary file unless --database) "
        "and a Python worker in this process, with no socket (wiggle.embedded; --console opens "
        "a loopback port for the console), run one instance of FLOW and print each step as it "
        "finishes. Exit 0 only when the instance COMPLETED.",
    )
    p.add_argument("flow", metavar="FLOW", help="the flow file (YAML or JSON)")
    p.add_argument(
        "--handlers",
        default=env("WIGGLE_HANDLERS"),
        required=env("WIGGLE_HANDLERS") is None,
        help="a .py file or a module name defining the activities (env WIGGLE_HANDLERS)",
    )
    p.add_argument(
        "--input",
        default=env("WIGGLE_INPUT", "null"),
        help="the start input: JSON, or @FILE (env WIGGLE_INPUT; default null)",
    )
    p.add_argument(
        "--mode",
        type=str.upper,
        choices=MODES,
        default=(env("WIGGLE_EXECUTION_MODE") or "").upper() or None,
        help=_MODE_HELP,
    )
    p.add_argument(
        "--database",
        default=env("WIGGLE_DATABASE_URL"),
        help="use this database instead of a temporary SQLite file (env WIGGLE_DATABASE_URL)",
    )
    p.add_argument(
        "--id",
        default=env("WIGGLE_INSTANCE_ID"),
        help="the instance id; run again with the same id and --database to resume an instance "
        "a killed run left unfinished: its steps are picked up once their leases expire "
        "(env WIGGLE_INSTANCE_ID)",
    )
    p.add_argument(
        "--signal",
        action="append",
        metavar="NAME=JSON",
        default=_env_list("WIGGLE_SIGNALS", "\n"),
        help="send signal NAME with a JSON payload right after the start; repeatable "
        "(buffered until the flow awaits it; env WIGGLE_SIGNALS, one NAME=JSON a line)",
    )
    p.add_argument(
        "--register",
        action="append",
        metavar="OTHER_FLOW",
        default=_env_list("WIGGLE_REGISTER", os.pathsep),
        help="also register this flow (so subflows resolve); repeatable "
        f"(env WIGGLE_REGISTER, {os.pathsep!r}-separated)",
    )
    p.add_argument(
        "--concurrency",
        type=int,
        default=int(env("WIGGLE_CONCURRENCY", "16") or 16),
        help="worker concurrency (env WIGGLE_CONCURRENCY; default %(default)s)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=float(env("WIGGLE_RUN_TIMEOUT", "0") or 0) or None,
        help="give up (exit 1) after this many seconds (env WIGGLE_RUN_TIMEOUT)",
    )
    p.add_argument(
        "--console",
        nargs="?",
        const=env("WIGGLE_CONSOLE_LISTEN", "127.0.0.1:8080"),
        default=None,
        metavar="HOST:PORT",
        help="also serve the web console (default 127.0.0.1:8080, env WIGGLE_CONSOLE_LISTEN) "
        "and keep it open after the instance ends, until Ctrl-C",
    )
    p.add_argument(
        "--json",
        action="store_true",
        default=env_flag("WIGGLE_JSON"),
        help='progress on stderr; the last stdout line is {"status": ..., "context": ...}',
    )
    p.set_defaults(handler=_run)
