"""`wiggle server`: the gRPC API over one database until SIGTERM / SIGINT."""

from __future__ import annotations

import argparse
import logging
from typing import Any

from wiggle.cli._options import (
    DEFAULT_ADDRESS,
    DEFAULT_DATABASE,
    MODES,
    add_database_profile,
    flag,
)
from wiggle.errors import InvalidRequest

__all__ = ["register"]

LOG_LEVELS = ("debug", "info", "warning", "error")


def add_log_level(parser: argparse.ArgumentParser) -> None:
    flag(
        parser,
        "--log-level",
        env="WIGGLE_LOG_LEVEL",
        default="info",
        choices=LOG_LEVELS,
        type=str.lower,
        help="logs go to stderr",
    )


def setup_logging(level: str) -> None:
    """Logs to stderr, one record per write (a traceback is one write, never split)."""
    logging.basicConfig(
        level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )


def _server(args: argparse.Namespace) -> int:
    from pathlib import Path

    from wiggle.engine import Engine
    from wiggle.graph import ExecutionMode
    from wiggle.server import ServerConfig, serve

    setup_logging(args.log_level)
    config = ServerConfig(
        address=args.address,
        token=args.token,
        token_file=Path(args.token_file) if args.token_file else None,
        credentials=Path(args.credentials) if args.credentials else None,
        tls_cert=Path(args.tls_cert) if args.tls_cert else None,
        tls_key=Path(args.tls_key) if args.tls_key else None,
        tls_client_ca=Path(args.tls_client_ca) if args.tls_client_ca else None,
        max_payload_bytes=args.max_payload_bytes,
        max_workers=args.threads,
        grace_s=args.grace,
        retention_ms=_retention_ms(args.retention),
        metrics_address=args.metrics_address,
    )
    config.check()  # before opening the database: a refused config should not touch it
    idle = args.idle_in_transaction_timeout
    if idle is not None and idle < 0:
        raise InvalidRequest("--idle-in-transaction-timeout must be 0 (off) or positive")
    engine = Engine(
        args.database,
        default_mode=ExecutionMode(args.execution_mode),
        database_profile=args.database_profile,
        idle_in_transaction_timeout_s=idle,
    )
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


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "server",
        help="run a Wiggle server",
        description="Serve the gRPC API over one database until SIGTERM / SIGINT "
        "(then finish in-flight calls and exit). Several servers may share one PostgreSQL.",
    )
    flag(
        p,
        "--database",
        env="WIGGLE_DATABASE_URL",
        default=DEFAULT_DATABASE,
        help="SQLAlchemy URL, sqlite:///FILE or postgresql://... (several hosts: "
        "postgresql://USER@/DB?host=A:5432&host=B:5432&target_session_attrs=read-write)",
    )
    add_database_profile(p)
    flag(
        p,
        "--idle-in-transaction-timeout",
        env="WIGGLE_IDLE_IN_TRANSACTION_TIMEOUT",
        type=float,
        metavar="SECONDS",
        help="PostgreSQL: end a session of this server that sits inside a transaction without "
        "a statement this long (idle_in_transaction_session_timeout), rolling it back and "
        "freeing its row locks, so a server frozen mid-transaction (SIGSTOP, a paused VM, a "
        "long GC pause) cannot stall the others, nor keep the leader row from a standby; "
        "0 leaves the database's own setting. Default: the leader lease (10 s); "
        "docs/scaling.md",
    )
    flag(
        p,
        "--address",
        env="WIGGLE_ADDRESS",
        default=DEFAULT_ADDRESS,
        help="host:port to listen on; a non-loopback address requires --credentials, "
        "--token-file or --token",
    )
    flag(
        p,
        "--credentials",
        env="WIGGLE_CREDENTIALS",
        help="a TOML file of named credentials with scopes (admin, client, worker:QUEUES), "
        "re-read when it changes; see docs/security.md",
    )
    flag(
        p,
        "--token-file",
        env="WIGGLE_AUTH_TOKEN_FILE",
        help="a file holding one shared token that may do everything; preferred to --token, "
        "which shows in the process list",
    )
    flag(p, "--token", env="WIGGLE_AUTH_TOKEN", help="one shared token that may do everything")
    flag(
        p,
        "--execution-mode",
        env="WIGGLE_EXECUTION_MODE",
        default="SERVER",
        type=str.upper,
        choices=MODES,
        help="mode for flows that say DEFAULT",
    )
    flag(p, "--tls-cert", env="WIGGLE_TLS_CERT", help="PEM certificate chain")
    flag(p, "--tls-key", env="WIGGLE_TLS_KEY", help="PEM private key")
    flag(
        p,
        "--tls-client-ca",
        env="WIGGLE_TLS_CLIENT_CA",
        help="PEM CA bundle; clients must present a certificate it signed (mutual TLS)",
    )
    flag(
        p,
        "--max-payload-bytes",
        env="WIGGLE_MAX_PAYLOAD_BYTES",
        default=4 * 1024 * 1024,
        type=int,
        help="largest context, input, result or signal payload",
    )
    flag(
        p,
        "--threads",
        env="WIGGLE_SERVER_THREADS",
        default=128,
        type=int,
        help="request handler threads; up to three quarters may hold waiting long polls "
        "(one per worker poller), further polls are told to back off",
    )
    flag(
        p,
        "--grace",
        env="WIGGLE_SHUTDOWN_GRACE",
        default=10.0,
        type=float,
        help="seconds in-flight calls may run on at shutdown",
    )
    flag(
        p,
        "--retention",
        env="WIGGLE_RETENTION",
        metavar="DURATION",
        help="remove instances that finished longer ago than this, e.g. 30d, with their "
        "tokens, events and signals: the leader prunes in small batches every minute "
        "(default: keep everything; see also `wiggle prune`)",
    )
    flag(
        p,
        "--metrics-address",
        env="WIGGLE_METRICS_ADDRESS",
        metavar="HOST:PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics (plain HTTP)",
    )
    add_log_level(p)
    p.set_defaults(handler=_server)
