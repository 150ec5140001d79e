"""The distributed pieces: `wiggle server`, `worker`, `deploy`, `start`, `signal`, `cancel` and
`status`.

Every flag has a `WIGGLE_*` environment twin (the flag wins). Commands that talk to a server share
the connection flags: `--address`, `--token` and the TLS options. Output is for people unless
`--json` is given, in which case stdout carries one JSON document.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import orjson

from wiggle.errors import InvalidRequest

if TYPE_CHECKING:
    from wiggle.client import Client, Event, Instance

__all__ = [
    "EventPrinter",
    "add_connection_flags",
    "env",
    "env_int",
    "parse_json",
    "register",
]

DEFAULT_ADDRESS = "127.0.0.1:7233"
DEFAULT_DATABASE = "sqlite:///wiggle.db"  # relative: a file in the working directory
MODES = ("SERVER", "LOCAL_SYNC", "LOCAL_ASYNC")


# -- shared helpers (also used by `wiggle run`) --------------------------------------------------


def env(name: str, default: str | None = None) -> str | None:
    """The value of environment variable `name`, or `default` when unset or empty."""
    value = os.environ.get(name, "")
    return value if value != "" else default


def env_int(name: str, default: int) -> int:
    value = env(name)
    try:
        return int(value) if value is not None else default
    except ValueError:
        raise SystemExit(f"wiggle: {name}={value!r} is not an integer") from None


def env_flag(name: str) -> bool:
    return (env(name) or "").strip().lower() in {"1", "true", "yes", "on"}


def parse_json(text: str, what: str) -> Any:
    """Parse a JSON command-line value; `@path` reads it from a file."""
    if text.startswith("@"):
        try:
            with open(text[1:], "rb") as f:
                data = f.read()
        except OSError as exc:
            raise InvalidRequest(f"cannot read {what} from {text[1:]}: {exc.strerror}") from None
    else:
        data = text.encode()
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest(f"{what} is not valid JSON: {exc}") from None


def _dump(value: Any) -> str:
    return orjson.dumps(value).decode()


def add_connection_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--address",
        default=env("WIGGLE_ADDRESS", DEFAULT_ADDRESS),
        help="server host:port (env WIGGLE_ADDRESS; default %(default)s)",
    )
    parser.add_argument(
        "--token", default=env("WIGGLE_AUTH_TOKEN"), help="bearer token (env WIGGLE_AUTH_TOKEN)"
    )
    parser.add_argument(
        "--tls",
        action="store_true",
        default=env_flag("WIGGLE_TLS"),
        help="connect with TLS, trusting the system roots (env WIGGLE_TLS); implied by --tls-*",
    )
    parser.add_argument(
        "--tls-ca",
        default=env("WIGGLE_TLS_CA"),
        help="PEM CA to verify the server (env WIGGLE_TLS_CA)",
    )
    parser.add_argument(
        "--tls-cert",
        default=env("WIGGLE_TLS_CERT"),
        help="PEM client certificate for mutual TLS (env WIGGLE_TLS_CERT)",
    )
    parser.add_argument(
        "--tls-key", default=env("WIGGLE_TLS_KEY"), help="its PEM private key (env WIGGLE_TLS_KEY)"
    )
    parser.add_argument(
        "--tls-server-name",
        default=env("WIGGLE_TLS_SERVER_NAME"),
        help="name to check in the server's certificate (env WIGGLE_TLS_SERVER_NAME)",
    )


def _tls_options(args: argparse.Namespace) -> tuple[str | None, str | None, str | None, str | None]:
    return args.tls_ca, args.tls_cert, args.tls_key, args.tls_server_name


def _uses_tls(args: argparse.Namespace) -> bool:
    return bool(args.tls or any(_tls_options(args)))


def _client(args: argparse.Namespace) -> Client:
    from wiggle.client import Client, TlsConfig

    tls = None
    if _uses_tls(args):
        ca, cert, key, name = _tls_options(args)
        tls = TlsConfig(ca=ca, cert=cert, key=key, server_name=name)
    return Client(args.address, token=args.token, tls=tls)


_MARKS = {
    "step_completed": ("✓", "+"),
    "step_failed": ("✗", "x"),
    "step_retried": ("↻", "r"),
}


class EventPrinter:
    """Prints each new event of an instance once, as one line: `  ✓ validate (attempt 1)`."""

    def __init__(self, out: Any = None) -> None:
        self._out = out
        self._seen = 0
        encoding = getattr(out or sys.stdout, "encoding", None) or "ascii"
        try:
            "✓✗↻·".encode(encoding)
            self._fancy = True
        except (UnicodeEncodeError, LookupError):
            self._fancy = False

    def line(self, event: Event) -> str:
        marks = _MARKS.get(event.kind)
        if marks is None:  # not a step outcome: name the event, then what it is about
            text = f"  {'·' if self._fancy else '-'} {event.kind.replace('_', ' ')}"
            if event.node_id:
                text += f" {event.node_id}"
        else:
            text = f"  {marks[0] if self._fancy else marks[1]} {event.node_id}"
            if event.attempt:
                text += f" (attempt {event.attempt})"
        message = event.detail.get("message") if isinstance(event.detail, dict) else None
        if isinstance(message, str) and message:
            text += f": {message}"
        return text

    def print_new(self, events: Iterable[Event]) -> None:
        out = self._out or sys.stdout
        for event in events:
            if event.seq <= self._seen:
                continue
            self._seen = event.seq
            if event.kind == "step_started":
                continue  # one line per step: its outcome
            print(self.line(event), file=out, flush=True)


def _event_row(event: Event) -> str:
    """`  #4  12:00:01.250  step_completed  validate  attempt 1  message` (times in UTC)."""
    import datetime

    at = datetime.datetime.fromtimestamp(event.at_ms / 1000, tz=datetime.UTC)
    row = f"  #{event.seq:<3} {at:%H:%M:%S}.{event.at_ms % 1000:03d}  {event.kind:<18}"
    if event.node_id:
        row += f" {event.node_id}"
    if event.attempt:
        row += f"  attempt {event.attempt}"
    message = event.detail.get("message") if isinstance(event.detail, dict) else None
    if isinstance(message, str) and message:
        row += f"  {message}"
    return row.rstrip()


def _describe_text(view: Instance, *, events: bool) -> str:
    lines = [
        f"instance  {view.instance_id}",
        f"flow      {view.flow} {view.version}",
        f"status    {view.status}" + (f" ({view.reason})" if view.reason else ""),
        f"mode      {view.execution_mode}",
    ]
    if view.parent_instance_id:
        lines.append(f"parent    {view.parent_instance_id}")
    lines.append(f"context   {_dump(view.context)}")
    live = [t for t in view.tokens if t.state != "DONE"]
    if live:
        lines.append("tokens")
        for t in live:
            where = f" [{t.branch}]" if t.branch else ""
            owner = f" leased to {t.lease_owner}" if t.lease_owner else ""
            lines.append(f"  {t.node_id}{where}  {t.state}  attempt {t.attempt}{owner}")
    if events and view.events:
        lines.append("events")
        lines.extend(_event_row(e) for e in view.events)
    return "\n".join(lines)


def _instance_json(view: Instance) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(view)


# -- server ------------------------------------------------------------------------------------


def _server(args: argparse.Namespace) -> int:
    from pathlib import Path

    from wiggle.engine import Engine
    from wiggle.graph import ExecutionMode
    from wiggle.server import ServerConfig, serve

    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    config = ServerConfig(
        address=args.address,
        token=args.token,
        tls_cert=Path(args.tls_cert) if args.tls_cert else None,
        tls_key=Path(args.tls_key) if args.tls_key else None,
        tls_client_ca=Path(args.tls_client_ca) if args.tls_client_ca else None,
        max_payload_bytes=args.max_payload_bytes,
        max_workers=args.threads,
        grace_s=args.grace,
        retention_ms=_retention_ms(args.retention),
    )
    config.check()  # before opening the database: a refused config should not touch it
    engine = Engine(args.database, default_mode=ExecutionMode(args.execution_mode))
    serve(engine, config)
    return 0


def _retention_ms(text: str | None) -> int | None:
    if not text:
        return None
    from wiggle.compiler._durations import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise InvalidRequest(f"--retention: {exc}") from None


def _register_server(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "server",
        help="run a Wiggle server",
        description="Serve the gRPC API over one database until SIGTERM / SIGINT "
        "(then finish in-flight calls and exit). Several servers may share one PostgreSQL.",
    )
    p.add_argument(
        "--database",
        default=env("WIGGLE_DATABASE_URL", DEFAULT_DATABASE),
        help="SQLAlchemy URL, sqlite:///FILE or postgresql://... "
        "(env WIGGLE_DATABASE_URL; default %(default)s)",
    )
    p.add_argument(
        "--address",
        default=env("WIGGLE_ADDRESS", DEFAULT_ADDRESS),
        help="host:port to listen on (env WIGGLE_ADDRESS; default %(default)s); "
        "a non-loopback address requires --token",
    )
    p.add_argument(
        "--token", default=env("WIGGLE_AUTH_TOKEN"), help="bearer token (env WIGGLE_AUTH_TOKEN)"
    )
    p.add_argument(
        "--execution-mode",
        type=str.upper,
        choices=MODES,
        default=(env("WIGGLE_EXECUTION_MODE", "SERVER") or "SERVER").upper(),
        help="mode for flows that say DEFAULT (env WIGGLE_EXECUTION_MODE; default %(default)s)",
    )
    p.add_argument(
        "--tls-cert",
        default=env("WIGGLE_TLS_CERT"),
        help="PEM certificate chain (env WIGGLE_TLS_CERT)",
    )
    p.add_argument(
        "--tls-key", default=env("WIGGLE_TLS_KEY"), help="PEM private key (env WIGGLE_TLS_KEY)"
    )
    p.add_argument(
        "--tls-client-ca",
        default=env("WIGGLE_TLS_CLIENT_CA"),
        help="PEM CA bundle; clients must present a certificate it signed (mutual TLS) "
        "(env WIGGLE_TLS_CLIENT_CA)",
    )
    p.add_argument(
        "--max-payload-bytes",
        type=int,
        default=env_int("WIGGLE_MAX_PAYLOAD_BYTES", 4 * 1024 * 1024),
        help="largest context, input, result or signal payload "
        "(env WIGGLE_MAX_PAYLOAD_BYTES; default %(default)s)",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=env_int("WIGGLE_SERVER_THREADS", 128),
        help="request handler threads; up to three quarters may hold waiting long polls "
        "(one per worker poller), further polls are told to back off "
        "(env WIGGLE_SERVER_THREADS; default %(default)s)",
    )
    p.add_argument(
        "--grace",
        type=float,
        default=float(env("WIGGLE_SHUTDOWN_GRACE", "10") or 10),
        help="seconds in-flight calls may run on at shutdown "
        "(env WIGGLE_SHUTDOWN_GRACE; default %(default)s)",
    )
    p.add_argument(
        "--retention",
        default=env("WIGGLE_RETENTION"),
        metavar="DURATION",
        help="remove instances that finished longer ago than this, e.g. 30d, with their "
        "tokens, events and signals: the leader prunes in small batches every minute "
        "(env WIGGLE_RETENTION; default: keep everything; see also `wiggle prune`)",
    )
    p.add_argument(
        "--log-level",
        default=env("WIGGLE_LOG_LEVEL", "info"),
        choices=("debug", "info", "warning", "error"),
        type=str.lower,
        help="(env WIGGLE_LOG_LEVEL; default %(default)s)",
    )
    p.set_defaults(handler=_server)


# -- worker ------------------------------------------------------------------------------------


def load_registry(spec: str) -> Any:
    """Import a handlers file or module; InvalidRequest with a clear message when it fails."""
    from wiggle.worker import load_handlers

    try:
        return load_handlers(spec)
    except ImportError as exc:
        raise InvalidRequest(f"cannot load handlers {spec!r}: {exc}") from None
    except Exception as exc:  # an error inside the user's module: say where, not a traceback
        raise InvalidRequest(
            f"importing handlers {spec!r} failed: {type(exc).__name__}: {exc}"
        ) from None


def _worker(args: argparse.Namespace) -> int:
    from wiggle.worker import TlsConfig, Worker

    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    registry = load_registry(args.handlers)
    tls: TlsConfig | bool | None = None
    if _uses_tls(args):
        ca, cert, key, name = _tls_options(args)
        tls = TlsConfig(ca=ca, cert=cert, key=key, server_name=name)
    queues = args.queue or [q for q in (env("WIGGLE_QUEUES", "default") or "").split(",") if q]
    worker = Worker(
        args.address,
        queues=queues,
        registry=registry,
        concurrency=args.concurrency,
        local_batch_size=args.batch_size,
        token=args.token,
        tls=tls,
    )
    worker.run()
    return 0


def _register_worker(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "worker",
        help="run a Python worker",
        description="Pull tasks from a server and run the activities of a handlers file or "
        "module until SIGTERM / SIGINT (then drain: buffered results are handed back).",
    )
    p.add_argument(
        "--handlers",
        default=env("WIGGLE_HANDLERS"),
        required=env("WIGGLE_HANDLERS") is None,
        help="a .py file or a module name defining @activity functions (env WIGGLE_HANDLERS)",
    )
    p.add_argument(
        "--queue",
        action="append",
        help="a queue to serve; repeatable (env WIGGLE_QUEUES, comma-separated; default default)",
    )
    p.add_argument(
        "--concurrency",
        type=int,
        default=env_int("WIGGLE_CONCURRENCY", 16),
        help="tasks run at once (env WIGGLE_CONCURRENCY; default %(default)s)",
    )
    p.add_argument(
        "--batch-size",
        type=int,
        default=env_int("WIGGLE_LOCAL_BATCH_SIZE", 64),
        help="LOCAL_ASYNC steps buffered before a flush "
        "(env WIGGLE_LOCAL_BATCH_SIZE; default %(default)s)",
    )
    p.add_argument(
        "--log-level",
        default=env("WIGGLE_LOG_LEVEL", "info"),
        choices=("debug", "info", "warning", "error"),
        type=str.lower,
        help="(env WIGGLE_LOG_LEVEL; default %(default)s)",
    )
    add_connection_flags(p)
    p.set_defaults(handler=_worker)


# -- deploy, start, signal, cancel, status -------------------------------------------------------


def _deploy(args: argparse.Namespace) -> int:
    from wiggle.compiler import load_flow_file
    from wiggle.errors import FlowError

    flows = []
    failed = False
    for path in args.flows:  # compile all first: nothing is deployed when one is broken
        try:
            flows.append((path, load_flow_file(path)))
        except FlowError as exc:
            for diagnostic in exc.diagnostics:
                print(diagnostic, file=sys.stderr)
            failed = True
        except OSError as exc:
            print(f"{path}:0:0: cannot read the flow: {exc.strerror}", file=sys.stderr)
            failed = True
    if failed:
        return 1
    results = []
    with _client(args) as client:
        for path, flow in flows:
            deployed = client.deploy(flow)
            results.append({"file": path, **_as_dict(deployed)})
            if not args.json:
                state = "deployed" if deployed.created else "unchanged"
                print(f"{deployed.name} {deployed.version} {state}")
    if args.json:
        print(_dump(results))
    return 0


def _as_dict(value: Any) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(value)


def _start(args: argparse.Namespace) -> int:
    value = parse_json(args.input, "--input")
    with _client(args) as client:
        started = client.start(args.flow, value, version=args.version, instance_id=args.id)
        if not args.wait:
            if args.json:
                print(_dump(_as_dict(started)))
            else:
                print(started.instance_id)
            return 0
        view = client.wait(started.instance_id, timeout=args.timeout)
    if args.json:
        print(
            _dump({"instance_id": view.instance_id, "status": view.status, "context": view.context})
        )
    else:
        reason = f" ({view.reason})" if view.reason else ""
        print(f"{view.instance_id} {view.status}{reason}")
        print(_dump(view.context))
    return 0 if view.status == "COMPLETED" else 1


def _signal(args: argparse.Namespace) -> int:
    payload = parse_json(args.payload, "--payload") if args.payload is not None else None
    with _client(args) as client:
        delivered = client.signal(args.instance_id, args.name, payload)
    if args.json:
        print(_dump({"delivered": delivered}))
    else:
        print("delivered" if delivered else "buffered (no await is waiting for it yet)")
    return 0


def _cancel(args: argparse.Namespace) -> int:
    with _client(args) as client:
        status = client.cancel(args.instance_id, args.reason or "")
    print(_dump({"status": status}) if args.json else status)
    return 0


def watch(
    client: Client,
    instance_id: str,
    *,
    out: Any = None,
    interval: float = 1.0,
    on_poll: Callable[[], None] | None = None,
) -> Instance:
    """Print the instance's step events as they happen until it finishes; its final view."""
    printer = EventPrinter(out)
    while True:
        view = client.describe(instance_id, events=True)
        printer.print_new(view.events)
        if view.status.finished:
            return view
        if on_poll is not None:
            on_poll()
        time.sleep(interval)


_CLEAR = "\x1b[H\x1b[2J"  # cursor home, clear screen


def _redraw(client: Client, instance_id: str, interval: float) -> Instance:
    """On a terminal: redraw the whole view (tokens and events) until the instance finishes."""
    while True:
        view = client.describe(instance_id, events=True)
        sys.stdout.write(_CLEAR + _describe_text(view, events=True) + "\n")
        sys.stdout.flush()
        if view.status.finished:
            return view
        time.sleep(interval)


def _status(args: argparse.Namespace) -> int:
    with _client(args) as client:
        if args.watch and not args.json and sys.stdout.isatty():
            _redraw(client, args.instance_id, args.interval)
            return 0
        if args.watch:  # not a terminal: one line per event, then the final view
            out = sys.stderr if args.json else sys.stdout
            print(f"watching {args.instance_id} (Ctrl-C to stop)", file=out, flush=True)
            view = watch(client, args.instance_id, out=out, interval=args.interval)
            view = client.describe(args.instance_id, events=args.events)
        else:
            view = client.describe(args.instance_id, events=args.events or args.json)
    if args.json:
        print(_dump(_instance_json(view)))
    else:
        print(_describe_text(view, events=args.events))
    return 0


def _register_client_commands(subparsers: Any) -> None:
    json_help = "print one JSON document on stdout"

    p = subparsers.add_parser("deploy", help="register flows with a server")
    p.add_argument("flows", nargs="+", metavar="FLOW", help="flow files (YAML or JSON)")
    p.add_argument("--json", action="store_true", default=env_flag("WIGGLE_JSON"), help=json_help)
    add_connection_flags(p)
    p.set_defaults(handler=_deploy)

    p = subparsers.add_parser("start", help="start an instance of a deployed flow")
    p.add_argument("flow", metavar="FLOW_NAME")
    p.add_argument(
        "--input",
        default=env("WIGGLE_INPUT", "null"),
        help="the input, JSON or @FILE (env WIGGLE_INPUT; default null)",
    )
    p.add_argument(
        "--version", default=env("WIGGLE_VERSION"), help="pin a version (env WIGGLE_VERSION)"
    )
    p.add_argument(
        "--id", default=env("WIGGLE_INSTANCE_ID"), help="instance id (env WIGGLE_INSTANCE_ID)"
    )
    p.add_argument(
        "--wait",
        action="store_true",
        default=env_flag("WIGGLE_WAIT"),
        help="wait until it finishes; exit 0 only when COMPLETED (env WIGGLE_WAIT)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=float(env("WIGGLE_WAIT_TIMEOUT", "0") or 0) or None,
        help="give up waiting after this many seconds (env WIGGLE_WAIT_TIMEOUT)",
    )
    p.add_argument("--json", action="store_true", default=env_flag("WIGGLE_JSON"), help=json_help)
    add_connection_flags(p)
    p.set_defaults(handler=_start)

    p = subparsers.add_parser("signal", help="send a signal to an instance")
    p.add_argument("instance_id", metavar="ID")
    p.add_argument("name", metavar="NAME")
    p.add_argument(
        "--payload", default=env("WIGGLE_PAYLOAD"), help="JSON or @FILE (env WIGGLE_PAYLOAD)"
    )
    p.add_argument("--json", action="store_true", default=env_flag("WIGGLE_JSON"), help=json_help)
    add_connection_flags(p)
    p.set_defaults(handler=_signal)

    p = subparsers.add_parser("cancel", help="cancel an instance")
    p.add_argument("instance_id", metavar="ID")
    p.add_argument("--reason", default=env("WIGGLE_REASON"), help="(env WIGGLE_REASON)")
    p.add_argument("--json", action="store_true", default=env_flag("WIGGLE_JSON"), help=json_help)
    add_connection_flags(p)
    p.set_defaults(handler=_cancel)

    p = subparsers.add_parser("status", help="show an instance")
    p.add_argument("instance_id", metavar="ID")
    p.add_argument(
        "--events",
        action="store_true",
        default=env_flag("WIGGLE_EVENTS"),
        help="include the event log (env WIGGLE_EVENTS)",
    )
    p.add_argument(
        "--watch",
        action="store_true",
        default=env_flag("WIGGLE_WATCH"),
        help="follow the instance until it finishes: a live view on a terminal, one line per "
        "event otherwise (env WIGGLE_WATCH)",
    )
    p.add_argument(
        "--interval",
        type=float,
        default=float(env("WIGGLE_WATCH_INTERVAL", "1") or 1),
        help="seconds between refreshes with --watch (env WIGGLE_WATCH_INTERVAL; default 1)",
    )
    p.add_argument("--json", action="store_true", default=env_flag("WIGGLE_JSON"), help=json_help)
    add_connection_flags(p)
    p.set_defaults(handler=_status)


def register(subparsers: Any) -> None:
    _register_server(subparsers)
    _register_worker(subparsers)
    _register_client_commands(subparsers)
