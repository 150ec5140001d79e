"""`wiggle retry`, `wiggle reset` and `wiggle batch`, and the `--filter` form of `cancel` and
`signal`: repairing what is running, one instance at a time or in bulk (docs/operations.md).

With an instance id, the action happens at once. With `--filter`, the command first shows what
the filter matches (how many instances per status, the first ids) and changes nothing; `--yes`
starts the action as a durable bulk action on the server, which `wiggle batch status` follows.
"""

from __future__ import annotations

import argparse
import getpass
import sys
import time
from typing import TYPE_CHECKING, Any

from wiggle.cli._options import add_connection_flags, add_json_flag, flag, make_client
from wiggle.cli._output import dump, instant
from wiggle.errors import InvalidRequest

if TYPE_CHECKING:
    from wiggle.client import Batch, BulkPreview, Client

__all__ = ["add_bulk_flags", "bulk_or_single", "register"]

STATUSES = ("RUNNING", "COMPLETED", "FAILED", "CANCELLED")


def add_bulk_flags(p: argparse.ArgumentParser) -> None:
    """--filter, --yes, --rate and --follow: the bulk form of an action."""
    flag(
        p,
        "--filter",
        env="WIGGLE_FILTER",
        action="append",
        separator=";",
        metavar="COND",
        help="act on every instance matching all these conditions instead of one id "
        "(status=FAILED, flow=NAME, age>1h, node=NODE, reason~TEXT, or a search attribute: "
        "order=A-1002, total>5000); repeat it to add conditions",
    )
    flag(
        p,
        "--yes",
        env="WIGGLE_YES",
        action="store_true",
        help="with --filter: start the bulk action (without it, only show what it would touch)",
    )
    flag(
        p,
        "--rate",
        env="WIGGLE_RATE",
        type=float,
        default=0.0,
        show_default=False,
        help="with --filter: instances per second (default: the server's, 50)",
    )
    flag(
        p,
        "--follow",
        env="WIGGLE_FOLLOW",
        action="store_true",
        help="with --filter --yes: print the progress until the bulk action ends",
    )


def _preview_text(action: str, preview: BulkPreview) -> str:
    counts = "  ".join(f"{s.lower()} {preview.by_status.get(s, 0)}" for s in STATUSES)
    lines = [f"{action}: the filter matches {preview.matched} instance(s): {counts}"]
    if preview.first_ids:
        shown = len(preview.first_ids)
        lines.append(f"first {shown}, oldest first:" if shown < preview.matched else "they are:")
        lines.extend(f"  {iid}" for iid in preview.first_ids)
    if preview.matched:
        lines.append("nothing changed; add --yes to start it as a bulk action")
    return "\n".join(lines)


def _batch_text(b: Batch) -> str:
    lines = [
        f"batch {b.batch_id}: {b.action} {b.state}",
        f"  filter     {' '.join(b.where) or '-'}",
        f"  asked by   {b.requested_by} at {instant(b.created_at_ms)}",
        f"  progress   {b.done} done, {b.skipped} skipped, {b.failed} failed, "
        f"{b.pending} pending of {b.matched} (at most {b.rate_per_s:g}/s)",
    ]
    if b.params:
        lines.insert(2, f"  params     {dump(b.params)}")
    if b.finished_at_ms:
        lines.append(f"  finished   {instant(b.finished_at_ms)}")
    for item in b.items:
        lines.append(f"  {item.state.lower():<8} {item.instance_id}: {item.message}")
    return "\n".join(lines)


def _follow(client: Client, batch_id: str, *, interval: float = 0.5) -> Batch:
    """Print a progress line whenever it moves, until the batch ends."""
    last = None
    while True:
        b = client.get_batch(batch_id)
        now = (b.done, b.skipped, b.failed, b.state)
        if now != last:
            print(
                f"{b.state.lower()}: {b.done} done, {b.skipped} skipped, {b.failed} failed, "
                f"{b.pending} pending",
                file=sys.stderr,
            )
            last = now
        if b.state not in ("RUNNING", "PAUSED"):
            return b
        time.sleep(interval)


def bulk_or_single(
    args: argparse.Namespace,
    action: str,
    params: dict[str, Any],
    single: Any,
) -> int:
    """The common shape: with --filter, preview or start the bulk action; else `single(client)`,
    which prints its own result."""
    where = args.filter or []
    with make_client(args) as client:
        if not where:
            return int(single(client))
        if not args.yes:
            preview = client.preview_bulk(where, action, params)
            if args.json:
                print(dump({"preview": preview.__dict__, "started": False}))
            else:
                from wiggle.client import describe_bulk_action

                print(_preview_text(describe_bulk_action(action, params), preview))
            if preview.matched == 0:
                raise InvalidRequest("the filter matches no instance: nothing to do")
            return 0
        batch = client.start_bulk(
            action, where, params=params, rate_per_s=args.rate, requested_by=_me()
        )
        if args.follow:
            batch = _follow(client, batch.batch_id)
        if args.json:
            print(dump({"batch": batch.__dict__, "started": True}))
        else:
            print(_batch_text(batch))
            if batch.state in ("RUNNING", "PAUSED"):
                print(f"follow it: wiggle batch status {batch.batch_id}")
    return 0


def _me() -> str:
    try:
        return f"user {getpass.getuser()}"
    except Exception:  # no login name in this environment
        return ""


def _one_id(args: argparse.Namespace, command: str) -> str:
    if args.filter and args.instance_id:
        raise InvalidRequest(f"wiggle {command}: give an instance id or --filter, not both")
    if not args.filter and not args.instance_id:
        raise InvalidRequest(f"wiggle {command}: give an instance id, or --filter COND")
    return str(args.instance_id or "")


def _retry(args: argparse.Namespace) -> int:
    iid = _one_id(args, "retry")

    def single(client: Client) -> int:
        r = client.retry(iid)
        if args.json:
            print(dump(r.__dict__))
        else:
            also = [i for i in r.instances if i != iid]
            extra = f" (with {', '.join(also)})" if also else ""
            print(f"{iid} {r.status}: running {', '.join(r.nodes)} again{extra}")
        return 0

    return bulk_or_single(args, "retry", {}, single)


def _reset(args: argparse.Namespace) -> int:
    iid = _one_id(args, "reset")

    def single(client: Client) -> int:
        r = client.reset(iid, args.to)
        print(dump(r.__dict__) if args.json else f"{iid} {r.status}: reset to {args.to}")
        return 0

    return bulk_or_single(args, "reset", {"node": args.to}, single)


def _batch(args: argparse.Namespace) -> int:
    with make_client(args) as client:
        if args.batch_command == "list":
            found = client.list_batches(limit=args.limit, action=args.action or "")
            if args.json:
                print(dump([b.__dict__ for b in found]))
            elif not found:
                print("no bulk action yet")
            for b in [] if args.json else found:
                print(
                    f"{b.batch_id}  {b.action:<7} {b.state:<9} {b.done}/{b.matched} done  "
                    f"{b.skipped} skipped  {b.failed} failed  {instant(b.created_at_ms)}  "
                    f"{' '.join(b.where)}"
                )
            return 0
        if args.batch_command == "status":
            b = client.get_batch(args.batch_id)
            if args.follow:
                b = _follow(client, args.batch_id)
        else:
            state = {"cancel": "CANCELLED", "pause": "PAUSED", "resume": "RUNNING"}
            b = client.update_batch(args.batch_id, state[args.batch_command])
    print(dump(b.__dict__) if args.json else _batch_text(b))
    return 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "retry",
        help="resume a FAILED instance where it failed (or many, by --filter)",
        description="Resume a FAILED instance where it failed: the steps that were running or "
        "waiting when it failed are back as they were, the failed step runs again with a fresh "
        "attempt count, completed branches keep their results. A failed subflow child and its "
        "parent come back together. With --filter, a bulk retry (preview first, --yes to run).",
    )
    p.add_argument("instance_id", metavar="ID", nargs="?", help="the instance to retry")
    add_bulk_flags(p)
    add_json_flag(p)
    add_connection_flags(p)
    p.set_defaults(handler=_retry)

    p = subparsers.add_parser(
        "reset",
        help="rewind an instance to a node it passed (or many, by --filter)",
        description="Rewind a RUNNING, FAILED or COMPLETED instance to NODE, a top-level node it "
        "passed, with the input NODE received the last time it ran. Steps running now are ended "
        "and their workers' reports refused. Buffered signals stay buffered. With --filter, a "
        "bulk reset (preview first, --yes to run).",
    )
    p.add_argument("instance_id", metavar="ID", nargs="?", help="the instance to reset")
    flag(p, "--to", env="WIGGLE_RESET_TO", required=True, metavar="NODE", help="the node id")
    add_bulk_flags(p)
    add_json_flag(p)
    add_connection_flags(p)
    p.set_defaults(handler=_reset)

    p = subparsers.add_parser(
        "batch",
        help="bulk actions: list, status, pause, resume, cancel",
        description="Bulk actions started with --filter --yes (retry, reset, cancel, signal): "
        "what each matched and how far it got.",
    )
    sub = p.add_subparsers(dest="batch_command", required=True, metavar="COMMAND")
    q = sub.add_parser("list", help="bulk actions, newest first")
    flag(q, "--limit", env="WIGGLE_LIMIT", type=int, default=20, help="how many")
    flag(q, "--action", env="WIGGLE_ACTION", help="only this action (retry, reset, ...)")
    add_json_flag(q)
    add_connection_flags(q)
    q.set_defaults(handler=_batch)
    for name, what in (
        ("status", "one bulk action: progress, skipped and failed instances with the reason"),
        ("pause", "pause a running bulk action"),
        ("resume", "resume a paused bulk action"),
        ("cancel", "stop a bulk action: the instances not reached yet are left alone"),
    ):
        q = sub.add_parser(name, help=what, description=what[0].upper() + what[1:] + ".")
        q.add_argument("batch_id", metavar="BATCH")
        if name == "status":
            flag(
                q,
                "--follow",
                env="WIGGLE_FOLLOW",
                action="store_true",
                help="print the progress until it ends",
            )
        add_json_flag(q)
        add_connection_flags(q)
        q.set_defaults(handler=_batch)
