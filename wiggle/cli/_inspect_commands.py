"""`wiggle status`, `wiggle list`, `wiggle wait` and `wiggle workers`: finding instances,
knowing why they wait, waiting for them, and seeing the fleet. Read-only."""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from wiggle.cli._options import add_connection_flags, add_json_flag, flag, make_client
from wiggle.cli._output import (
    EventPrinter,
    describe_text,
    dump,
    instance_json,
    instances_table,
    workers_table,
)
from wiggle.errors import InvalidRequest

if TYPE_CHECKING:
    from wiggle.client import Client, Instance

__all__ = ["register", "watch"]

STATUSES = ("RUNNING", "COMPLETED", "FAILED", "CANCELLED")


def _instant_ms(text: str, what: str) -> int:
    """A duration back from now (`30m`, `2d`) or an RFC 3339 instant, as epoch milliseconds."""
    from wiggle.compiler._durations import is_duration_syntax, parse_duration

    try:
        if is_duration_syntax(text):
            return int(time.time() * 1000) - parse_duration(text)
        at = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise InvalidRequest(f"{what} {text!r}: {exc}") from None
    if at.tzinfo is None:
        raise InvalidRequest(f"{what} {text!r}: give a time zone (e.g. 2025-01-31T12:00:00Z)")
    return int(at.timestamp() * 1000)


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
        sys.stdout.write(_CLEAR + describe_text(view, events=True) + "\n")
        sys.stdout.flush()
        if view.status.finished:
            return view
        time.sleep(interval)


def _status(args: argparse.Namespace) -> int:
    with make_client(args) as client:
        if args.watch and not args.json and sys.stdout.isatty():
            _redraw(client, args.instance_id, args.interval)
            return 0
        if args.watch:  # not a terminal: one line per event, then the final view
            out = sys.stderr if args.json else sys.stdout
            out.write(f"watching {args.instance_id} (Ctrl-C to stop)\n")
            out.flush()
            watch(client, args.instance_id, out=out, interval=args.interval)
        view = client.describe(args.instance_id, events=args.events or args.json)
    print(dump(instance_json(view)) if args.json else describe_text(view, events=args.events))
    return 0


def _list(args: argparse.Namespace) -> int:
    status = args.status.upper() if args.status else None
    if status is not None and status not in STATUSES:
        raise InvalidRequest(f"--status {args.status!r}: use one of {', '.join(STATUSES)}")
    query: dict[str, Any] = {
        "flow": args.flow,
        "status": status,
        "version": args.version,
        "started_after_ms": _instant_ms(args.since, "--since") if args.since else None,
        "started_before_ms": _instant_ms(args.before, "--before") if args.before else None,
        "id_contains": args.id_contains,
        "where": args.where or [],
    }
    with make_client(args) as client:
        page = client.list_instances(**query, limit=args.limit, page_token=args.page, counts=True)
    if args.json:
        document = {
            "instances": [instance_json(i) for i in page],
            "next_page_token": page.next_page_token,
            "counts": page.counts,
        }
        print(dump(document))
        return 0
    if page:
        print(instances_table(page))
    else:
        print("no instances match")
    counts = "  ".join(f"{s.lower()} {page.counts.get(s, 0)}" for s in STATUSES)
    print(f"\nmatching: {counts}")
    if page.next_page_token:
        print(f"more: add --page {page.next_page_token}")
    return 0


def _wait_filter(args: argparse.Namespace, deadline: float | None) -> int:
    """Wait until no instance the filter matches is RUNNING; exit 0 when all COMPLETED."""
    with make_client(args) as client:
        while True:
            page = client.list_instances(where=args.filter, limit=1, counts=True)
            counts = page.counts
            if args.count is not None:
                if sum(counts.values()) >= args.count:
                    break
            elif counts.get("RUNNING", 0) == 0:
                break
            if deadline is not None and time.monotonic() > deadline:
                raise InvalidRequest(
                    f"wiggle wait: not there after {args.timeout} s: "
                    + "  ".join(f"{st.lower()} {n}" for st, n in counts.items())
                )
            time.sleep(0.2)
    if args.json:
        print(dump({"counts": counts}))
    else:
        print("  ".join(f"{st.lower()} {counts.get(st, 0)}" for st in STATUSES))
    if args.count is not None:
        return 0
    others = sum(n for st, n in counts.items() if st != "COMPLETED")
    return 0 if others == 0 else 1


def _wait(args: argparse.Namespace) -> int:
    """Wait for each instance to end; exit 0 only when every one COMPLETED."""
    deadline = time.monotonic() + args.timeout if args.timeout else None
    if bool(args.filter) == bool(args.instance_ids):
        raise InvalidRequest("wiggle wait: give instance ids, or --filter COND (not both)")
    if args.filter:
        return _wait_filter(args, deadline)
    ended = []
    with make_client(args) as client:
        for instance_id in args.instance_ids:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            try:
                view = client.wait(instance_id, timeout=left)
            except TimeoutError as exc:
                raise InvalidRequest(f"wiggle wait: {exc}") from None
            ended.append(view)
            if not args.json:
                reason = f" ({view.reason})" if view.reason else ""
                print(f"{view.instance_id} {view.status}{reason}")
    if args.json:
        print(
            dump(
                [
                    {"instance_id": v.instance_id, "status": v.status, "reason": v.reason}
                    for v in ended
                ]
            )
        )
    return 0 if all(v.status == "COMPLETED" for v in ended) else 1


def _workers(args: argparse.Namespace) -> int:
    from wiggle.compiler._durations import parse_duration

    within = 0
    if args.within:
        try:
            within = parse_duration(args.within)
        except ValueError as exc:
            raise InvalidRequest(f"--within: {exc}") from None
    with make_client(args) as client:
        workers, now = client.list_workers(seen_within_ms=within)
    if args.json:
        print(dump({"workers": [w.__dict__ for w in workers], "server_now_ms": now}))
    elif workers:
        print(workers_table(workers, now))
    else:
        print("no worker has polled recently")
    return 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "status",
        help="show an instance and why it waits",
        description="Show instance ID: its current context, its children and parent, and for "
        "every live token one sentence saying what it waits for, with the token's context.",
    )
    p.add_argument("instance_id", metavar="ID")
    flag(p, "--events", env="WIGGLE_EVENTS", action="store_true", help="include the event log")
    flag(
        p,
        "--watch",
        env="WIGGLE_WATCH",
        action="store_true",
        help="follow the instance until it finishes: a live view on a terminal, one line per "
        "event otherwise",
    )
    flag(
        p,
        "--interval",
        env="WIGGLE_WATCH_INTERVAL",
        default=1.0,
        type=float,
        help="seconds between refreshes with --watch",
    )
    add_json_flag(p)
    add_connection_flags(p)
    p.set_defaults(handler=_status)

    p = subparsers.add_parser(
        "list",
        help="list instances, newest first",
        description="List instances newest first, a page at a time, with how many match per "
        "status. Filters combine.",
    )
    flag(p, "--flow", env="WIGGLE_FLOW", help="only this flow")
    flag(p, "--version", env="WIGGLE_VERSION", help="only this version (sha256:...)")
    flag(p, "--status", env="WIGGLE_STATUS", help="RUNNING, COMPLETED, FAILED or CANCELLED")
    flag(
        p,
        "--since",
        env="WIGGLE_SINCE",
        metavar="WHEN",
        help="started at or after WHEN: a duration back from now (30m, 2d) or an RFC 3339 instant",
    )
    flag(p, "--before", env="WIGGLE_BEFORE", metavar="WHEN", help="started before WHEN")
    flag(p, "--id-contains", env="WIGGLE_ID_CONTAINS", help="instance ids containing this text")
    flag(
        p,
        "--where",
        env="WIGGLE_WHERE",
        action="append",
        separator=";",
        metavar="COND",
        help="a condition that must hold, repeatable: status=FAILED, age>1h, node=NODE, "
        "reason~TEXT, or a search attribute of the flow (order=A-1002, total>5000)",
    )
    flag(p, "--limit", env="WIGGLE_LIMIT", default=20, type=int, help="instances per page")
    flag(p, "--page", env="WIGGLE_PAGE", metavar="TOKEN", help="the page a previous list named")
    add_json_flag(p)
    add_connection_flags(p)
    p.set_defaults(handler=_list)

    p = subparsers.add_parser(
        "wait",
        help="wait for instances to end",
        description="Wait until every instance ID has ended and print how each ended; exit 0 "
        "only when all COMPLETED (1 otherwise, or when --timeout passes first). With --filter, "
        "wait until no instance it matches is RUNNING, then print the counts per status.",
    )
    p.add_argument("instance_ids", metavar="ID", nargs="*")
    flag(
        p,
        "--filter",
        env="WIGGLE_FILTER",
        action="append",
        separator=";",
        metavar="COND",
        help="wait for every instance matching these conditions (as wiggle list --where)",
    )
    flag(
        p,
        "--count",
        env="WIGGLE_WAIT_COUNT",
        type=int,
        help="with --filter: wait until at least N instances match (for example N instances at "
        "an await: --filter node=NODE), instead of until none of them is RUNNING",
    )
    flag(
        p,
        "--timeout",
        env="WIGGLE_WAIT_TIMEOUT",
        type=float,
        help="give up after this many seconds (default: wait as long as it takes)",
    )
    add_json_flag(p)
    add_connection_flags(p)
    p.set_defaults(handler=_wait)

    p = subparsers.add_parser(
        "workers",
        help="list the workers polling the server",
        description="Workers that polled recently: their queues, activities, slots and SDK.",
    )
    flag(
        p,
        "--within",
        env="WIGGLE_WITHIN",
        metavar="DURATION",
        help="only those that polled within this long (30s, 5m); default: the server's (30s)",
    )
    add_json_flag(p)
    add_connection_flags(p)
    p.set_defaults(handler=_workers)
