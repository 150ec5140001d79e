"""Options shared by the commands: `flag()` (every flag with its `WIGGLE_*` twin), the connection
flags (read by `wiggle._connection`'s rules), JSON arguments and the client they build.

A flag's environment twin is its default: the flag wins when both are given. An environment value
is converted (and refused) by the same `type` as the flag, and only for the command being run, so
a bad `WIGGLE_THREADS` never breaks `wiggle validate`.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

from wiggle.errors import InvalidRequest

if TYPE_CHECKING:
    from wiggle._connection import Connection
    from wiggle.client import Client

__all__ = [
    "DEFAULT_ADDRESS",
    "DEFAULT_DATABASE",
    "MODES",
    "TRUE",
    "add_connection_flags",
    "add_database_profile",
    "add_json_flag",
    "connection_of",
    "env",
    "env_flag",
    "flag",
    "make_client",
    "parse_json",
]

DEFAULT_ADDRESS = "127.0.0.1:7233"
DEFAULT_DATABASE = "sqlite:///wiggle.db"  # relative: a file in the working directory
MODES = ("SERVER", "LOCAL_SYNC", "LOCAL_ASYNC")
TRUE = frozenset({"1", "true", "yes", "on"})
#: How long a command-line client keeps retrying an unreachable server before saying so.
CONNECT_RETRY_S = 1.5


def env(name: str, default: str | None = None) -> str | None:
    """The value of environment variable `name`, or `default` when unset or empty."""
    value = os.environ.get(name, "")
    return value if value != "" else default


def env_flag(name: str) -> bool:
    return (env(name) or "").strip().lower() in TRUE


def _typed(convert: Callable[[str], Any], twin: str) -> Callable[[str], Any]:
    """`convert` with an error that names the environment twin, which may be the culprit."""
    what = {int: "an integer", float: "a number"}.get(convert, "valid")  # type: ignore[call-overload]

    def parse(text: str) -> Any:
        try:
            return convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not {what} (from the flag or {twin})"
            ) from None

    parse.__name__ = getattr(convert, "__name__", "value")
    return parse


def flag(
    parser: argparse.ArgumentParser,
    *names: str,
    env: str,
    help: str,
    default: Any = None,
    type: Callable[[str], Any] | None = None,
    action: str | None = None,
    separator: str = ",",
    show_default: bool = True,
    **kwargs: Any,
) -> None:
    """Add an option whose default is environment variable `env` (then `default`); the help
    says so. `action="store_true"` reads 1/true/yes/on; `action="append"` splits the variable
    on `separator`."""
    raw = os.environ.get(env, "")
    if kwargs.get("required") and raw:
        kwargs["required"] = False  # the environment gives it
    note = f"env {env}"
    if show_default and default not in (None, False, []):
        note += "; default %(default)s"
    help_text = f"{help} ({note})" if help else f"({note})"
    if type is not None:
        kwargs["type"] = type if action == "append" else _typed(type, env)
    if action == "store_true":
        on = raw.strip().lower() in TRUE if raw else bool(default)
        parser.add_argument(*names, action=action, default=on, help=help_text, **kwargs)
        return
    if action == "append":
        listed = [v.strip() for v in raw.split(separator) if v.strip()] if raw else None
        parser.add_argument(
            *names, action=action, default=listed or default, help=help_text, **kwargs
        )
        return
    # A string default goes through `type` when the flag is absent (argparse does that lazily).
    parser.add_argument(*names, default=raw if raw else default, help=help_text, **kwargs)


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


#: The database profiles (wiggle.engine.DatabaseProfile), kept here so `--help` needs no engine.
DATABASE_PROFILES = ("default", "distributed")


def add_database_profile(parser: argparse.ArgumentParser) -> None:
    flag(
        parser,
        "--database-profile",
        env="WIGGLE_DATABASE_PROFILE",
        default="default",
        type=str.lower,
        choices=DATABASE_PROFILES,
        help="what Wiggle may ask of a PostgreSQL-protocol database: 'distributed' for "
        "YugabyteDB, CockroachDB or Citus (no LISTEN/NOTIFY, no advisory locks, keys they can "
        "spread, transactions retried; docs/scaling.md); a database keeps the profile it was "
        "created under",
    )


def add_subcommand(
    sub: Any, name: str, help: str, description: str, handler: Callable[..., int]
) -> argparse.ArgumentParser:
    """A subcommand of a command group (`wiggle schedule apply`, `wiggle task claim`) that runs
    `handler(args)`."""
    parser: argparse.ArgumentParser = sub.add_parser(name, help=help, description=description)
    parser.set_defaults(handler=handler)
    return parser


def add_json_flag(parser: argparse.ArgumentParser, help: str = "") -> None:
    flag(
        parser,
        "--json",
        env="WIGGLE_JSON",
        action="store_true",
        help=help or "print one JSON document on stdout (errors too)",
    )


#: Where the connection variables, their defaults and their rules are written down.
CONNECTION_DOC = 'docs/worker-protocol.md, "Connection"'


def add_connection_flags(parser: argparse.ArgumentParser) -> None:
    """The connection flags. Unlike `flag()`'s, their variables are read when the command runs
    (`connection_of`), by the rules every SDK shares: a flag wins over its variable, and
    --token or --token-file ignores both token variables."""
    group = parser.add_argument_group(
        "connection",
        f"each flag overrides its WIGGLE_* variable; defaults and rules: {CONNECTION_DOC}",
    )
    group.add_argument(
        "--address", help=f"server host:port (env WIGGLE_ADDRESS; default {DEFAULT_ADDRESS})"
    )
    group.add_argument(
        "--token-file",
        help="a file holding the bearer token; preferred to --token, which other users of this "
        "machine can read in the process list (env WIGGLE_AUTH_TOKEN_FILE)",
    )
    group.add_argument("--token", help="bearer token (env WIGGLE_AUTH_TOKEN)")
    group.add_argument(
        "--tls",
        action="store_true",
        default=None,
        help="connect with TLS, trusting the system roots; implied by --tls-* (env WIGGLE_TLS)",
    )
    group.add_argument("--tls-ca", help="PEM CA to verify the server (env WIGGLE_TLS_CA)")
    group.add_argument(
        "--tls-cert", help="PEM client certificate for mutual TLS (env WIGGLE_TLS_CERT)"
    )
    group.add_argument("--tls-key", help="its PEM private key (env WIGGLE_TLS_KEY)")
    group.add_argument(
        "--tls-server-name",
        help="name to check in the server's certificate (env WIGGLE_TLS_SERVER_NAME)",
    )


def connection_of(args: argparse.Namespace) -> Connection:
    """The connection the flags ask for, the WIGGLE_* variables filling in the rest; files
    (token, certificates) are read now, and a bad setting is an InvalidRequest naming it."""
    from wiggle._connection import Settings, connection

    return connection(
        Settings(
            address=args.address,
            token=args.token,
            token_file=args.token_file,
            tls=args.tls,
            ca=args.tls_ca,
            cert=args.tls_cert,
            key=args.tls_key,
            server_name=args.tls_server_name,
        )
    )


def make_client(args: argparse.Namespace) -> Client:
    """A client for a command: it gives up on an unreachable server quickly (and says so)."""
    from wiggle.client import Client

    conn = connection_of(args)
    return Client(conn.address, token=conn.token, tls=conn.tls, retry_for=CONNECT_RETRY_S)
