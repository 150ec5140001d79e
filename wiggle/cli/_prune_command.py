"""`wiggle prune`: remove finished instances from the database, in small batches.

It talks to the database directly (the same URL a server uses), not through a server: pruning
is an operator's maintenance job, safe to run while servers run on the same database. A server
can also prune by itself (`wiggle server --retention`).
"""

from __future__ import annotations

import argparse
import datetime
import sys
from typing import TYPE_CHECKING, Any

import orjson

from wiggle.cli._options import DEFAULT_DATABASE, add_database_profile, add_json_flag, flag
from wiggle.cli._output import counted
from wiggle.errors import InvalidRequest

if TYPE_CHECKING:
    from wiggle.engine import PruneResult

__all__ = ["register"]


def _duration_ms(text: str, flag: str) -> int:
    from wiggle.compiler._durations import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise InvalidRequest(f"{flag}: {exc}") from None


def _check_database(url: str) -> None:
    """A SQLite file that does not exist is a typo, not an empty history: refuse it rather
    than create a new database."""
    from pathlib import Path

    from sqlalchemy import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except ArgumentError:
        raise InvalidRequest(f"--database: {url[:80]!r} is not a database URL") from None
    path = parsed.database
    is_file = parsed.get_backend_name() == "sqlite" and path not in (None, "", ":memory:")
    if is_file and not Path(str(path)).exists():
        raise InvalidRequest(f"--database: no SQLite database at {str(path)[:200]}")


def _prune(args: argparse.Namespace) -> int:
    older_than = _duration_ms(args.finished_before, "--finished-before")
    if args.batch < 1:
        raise InvalidRequest("--batch must be at least 1")
    _check_database(args.database)
    from wiggle.engine import Engine

    engine = Engine(args.database, database_profile=args.database_profile)
    try:
        result = engine.prune(older_than, batch=args.batch, dry_run=args.dry_run)
    finally:
        engine.close()
    cutoff = datetime.datetime.fromtimestamp(result.cutoff_ms / 1000, tz=datetime.UTC)
    if args.json:
        document: dict[str, Any] = {
            "dry_run": result.dry_run,
            "finished_before_ms": result.cutoff_ms,
            "instances": result.instances,
            "tokens": result.tokens,
            "events": result.events,
            "signals": result.signals,
        }
        sys.stdout.write(orjson.dumps(document).decode() + "\n")
        return 0
    print(summary(result, cutoff))
    return 0


def summary(result: PruneResult, cutoff: datetime.datetime) -> str:
    """What a prune removed, or would: `removed 1 finished instance that ended before ...`."""
    verb = "would remove" if result.dry_run else "removed"
    what = counted(result.instances, "finished instance")
    return (
        f"{verb} {what} that ended before {cutoff:%Y-%m-%d %H:%M:%S} UTC, with "
        f"{counted(result.tokens, 'token')}, {counted(result.events, 'event')} and "
        f"{counted(result.signals, 'signal')}"
    )


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "prune",
        help="remove finished instances from the database",
        description="Remove the instances that finished (COMPLETED, FAILED or CANCELLED) "
        "before a time, with their tokens, events, signals and subflow children, in small "
        "transactions that are safe beside running servers. A RUNNING instance, and a finished "
        "child of a running parent, is never removed. Works on the database directly.",
    )
    flag(
        p,
        "--finished-before",
        env="WIGGLE_PRUNE_FINISHED_BEFORE",
        required=True,
        metavar="DURATION",
        help="how long ago an instance must have ended, e.g. 7d, 12h, 30m",
    )
    flag(
        p,
        "--database",
        env="WIGGLE_DATABASE_URL",
        default=DEFAULT_DATABASE,
        help="SQLAlchemy URL, sqlite:///FILE or postgresql://...",
    )
    add_database_profile(p)
    flag(
        p,
        "--batch",
        env="WIGGLE_PRUNE_BATCH",
        default=500,
        type=int,
        help="instances (with their children) per transaction",
    )
    flag(
        p,
        "--dry-run",
        env="WIGGLE_DRY_RUN",
        action="store_true",
        help="count what would go, remove nothing",
    )
    add_json_flag(p, "print one JSON object")
    p.set_defaults(handler=_prune)
