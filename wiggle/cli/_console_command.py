"""`wiggle console`: the web console, a gRPC client of any Wiggle server (docs/console.md)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any

from wiggle.cli._options import add_connection_flags, connection_of, env, env_flag, flag

__all__ = ["DEFAULT_LISTEN", "register"]

DEFAULT_LISTEN = "127.0.0.1:8080"


def _console(args: argparse.Namespace) -> int:
    from wiggle.console import Backend, ConsoleServer, parse_listen, settings_for

    host, port = parse_listen(args.listen)
    if bool(args.https_cert) != bool(args.https_key):
        print("wiggle: give both --https-cert and --https-key, or neither", file=sys.stderr)
        return 2
    conn = connection_of(args)
    settings = settings_for(
        host,
        conn.token,
        require_login=True if args.require_login else None,
        tls=bool(args.https_cert),
        trusted_proxies=args.trusted_proxy or (),
        credentials=args.credentials,
        person=args.person,
        trace_url=args.trace_url,
    )
    if args.flows:
        settings = dataclasses.replace(settings, flows_dir=args.flows)
    backend = Backend(conn.address, token=conn.token, tls=conn.tls)
    try:
        server = ConsoleServer(
            backend, host, port, settings, tls_cert=args.https_cert, tls_key=args.https_key
        )
        if settings.credentials:
            login = " (each person logs in with their own token)"
        elif settings.require_login:
            login = " (log in with the server's token)"
        else:
            login = ""
        print(f"console: {server.url}/ for the server at {conn.address}{login}", flush=True)
        server.run()
    finally:
        backend.close()
    return 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "console",
        help="serve the web console of a Wiggle server",
        description="Serve the web console (instances, their live graphs, incidents, flows, "
        "queues, workers, human tasks) for the Wiggle server at --address. Bound to loopback "
        "it needs no login; bound to any other address, or behind --trusted-proxy, it requires "
        "--token (or --credentials) and asks each browser to log in. With --credentials each "
        "person logs in with their own token and sees their own tasks.",
    )
    p.add_argument(
        "--listen",
        default=env("WIGGLE_CONSOLE_LISTEN", DEFAULT_LISTEN),
        metavar="HOST:PORT",
        help="where the console listens (env WIGGLE_CONSOLE_LISTEN; default %(default)s)",
    )
    p.add_argument(
        "--require-login",
        action="store_true",
        default=env_flag("WIGGLE_CONSOLE_REQUIRE_LOGIN"),
        help="ask for the token even on loopback (env WIGGLE_CONSOLE_REQUIRE_LOGIN)",
    )
    p.add_argument(
        "--https-cert",
        default=env("WIGGLE_CONSOLE_HTTPS_CERT"),
        help="serve HTTPS with this PEM certificate chain (env WIGGLE_CONSOLE_HTTPS_CERT)",
    )
    p.add_argument(
        "--https-key",
        default=env("WIGGLE_CONSOLE_HTTPS_KEY"),
        help="... and this PEM private key (env WIGGLE_CONSOLE_HTTPS_KEY)",
    )
    flag(
        p,
        "--trusted-proxy",
        env="WIGGLE_CONSOLE_TRUSTED_PROXY",
        action="append",
        metavar="ADDRESS",
        help="the IP address a TLS-terminating proxy connects from; only its X-Forwarded-Host, "
        "-Proto and -For are honoured (repeatable; the env twin takes a comma-separated list)",
    )
    flag(
        p,
        "--flows",
        env="WIGGLE_CONSOLE_FLOWS",
        metavar="DIR",
        help="a directory of flow files (with samples/NAME.json beside them): the flow pages "
        "show their descriptions and pre-fill the start form with the sample input",
    )
    flag(
        p,
        "--credentials",
        env="WIGGLE_CONSOLE_CREDENTIALS",
        metavar="FILE",
        help="the server's credentials file: each person logs in with their own token, is the "
        "credential's name, and sees what its scopes and groups allow (a login is then asked "
        "for on loopback too)",
    )
    flag(
        p,
        "--as",
        dest="person",
        env="WIGGLE_PERSON",
        metavar="PERSON",
        help="without a login: the name the console acts on human tasks under, as an admin "
        "(default: 'token' with --token, else 'admin')",
    )
    flag(
        p,
        "--trace-url",
        env="WIGGLE_CONSOLE_TRACE_URL",
        metavar="URL",
        help="a trace viewer's URL with {trace_id} in it (Jaeger: "
        "'http://jaeger:16686/trace/{trace_id}'): an instance's page links its trace there "
        "(docs/observability.md)",
    )
    add_connection_flags(p)
    p.set_defaults(handler=_console)
