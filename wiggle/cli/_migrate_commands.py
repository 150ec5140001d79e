"""`wiggle diff` and `wiggle migrate plan | apply | rollback`: comparing two versions of a flow
and moving live instances from one to the other (docs/migration.md)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from wiggle.cli._options import add_connection_flags, add_json_flag, flag, make_client
from wiggle.cli._output import dump
from wiggle.cli._repair_commands import _batch_text, _follow, _me
from wiggle.errors import InvalidRequest

if TYPE_CHECKING:
    from wiggle.graph import Graph
    from wiggle.migration import GraphDiff

__all__ = ["diff_picture", "graph_of_spec", "register"]


def graph_of_spec(spec: str, args: argparse.Namespace) -> Graph:
    """A flow file, or a deployed version: NAME (its newest), NAME@VERSION (in full or the
    start of its digest)."""
    from wiggle.compiler import graph_from_canonical, load_flow_file

    if os.path.exists(spec) or spec.endswith((".yaml", ".yml", ".json")):
        return load_flow_file(spec).graph
    name, _, version = spec.partition("@")
    with make_client(args) as client:
        if version:
            digest = version.removeprefix("sha256:")
            known = [d.version for d in client.list_definitions(name)]
            found = [v for v in known if v.removeprefix("sha256:").startswith(digest)]
            if len(found) != 1:
                shown = ", ".join(v[:19] for v in known) or "none deployed"
                raise InvalidRequest(
                    f"{spec!r}: {'no' if not found else 'more than one'} version of {name!r} "
                    f"starts with {version!r} ({shown})"
                )
            version = found[0]
        stored = client.get_definition(name, version or None)
    return graph_from_canonical(stored.canonical).graph


def _diff(args: argparse.Namespace) -> int:
    from wiggle.migration import diff_graphs

    old, new = graph_of_spec(args.old, args), graph_of_spec(args.new, args)
    if old.name != new.name:
        raise InvalidRequest(f"{args.old} is flow {old.name!r} and {args.new} is {new.name!r}")
    found = diff_graphs(old, new)
    print(dump(found.as_json()) if args.json else found.text())
    return 0


def diff_picture(args: argparse.Namespace) -> tuple[Graph, dict[str, str], str]:
    """For `wiggle render --diff OLD NEW`: the new graph, each changed node's mark, and a
    caption naming what was removed."""
    from wiggle.migration import diff_graphs

    old_spec, new_spec = args.diff
    old, new = graph_of_spec(old_spec, args), graph_of_spec(new_spec, args)
    found: GraphDiff = diff_graphs(old, new)
    return new, found.marks(), found.caption()


def _plan(args: argparse.Namespace) -> int:
    from wiggle.migration import plan_text

    mapping: dict[str, str] = {}
    for pair in args.map or []:
        old, sep, new = pair.partition("=")
        if not sep or not old or not new:
            raise InvalidRequest(f"--map {pair!r}: write OLD=NEW (node ids)")
        mapping[old.strip()] = new.strip()
    with make_client(args) as client:
        plan = client.plan_migration(
            args.flow,
            args.to,
            from_versions=args.from_versions or [],
            where=args.filter or [],
            mapping=mapping,
            timers=args.timers,
            children=args.children,
        )
    out = args.output or f"{args.flow}-migration.json"
    if out != "-":
        Path(out).write_bytes(orjson.dumps(plan, option=orjson.OPT_INDENT_2) + b"\n")
    if args.json:
        if out == "-":
            print(dump(plan))
        else:
            print(dump({"plan": out, "hash": plan["hash"], "summary": plan["summary"]}))
        return 0
    if out == "-":
        print(dump(plan))
        return 0
    print(plan_text(plan))
    print(f"written to {out}; apply it with: wiggle migrate apply {out}")
    return 0


def _read_plan(path: str) -> Any:
    try:
        data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as exc:
        raise InvalidRequest(f"cannot read the plan {path}: {exc.strerror}") from None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest(f"{path} is not JSON: {exc}") from None


def _apply(args: argparse.Namespace) -> int:
    plan = _read_plan(args.plan)
    with make_client(args) as client:
        batch = client.apply_migration(
            plan,
            limit=args.limit,
            rate_per_s=args.rate,
            skip_changed=args.skip_changed,
            requested_by=_me(),
        )
        if args.follow:
            batch = _follow(client, batch.batch_id)
    print(dump(batch.__dict__) if args.json else _batch_text(batch))
    return 0


def _rollback(args: argparse.Namespace) -> int:
    if bool(args.batch_id) == bool(args.plan):
        raise InvalidRequest("wiggle migrate rollback: give a BATCH id or --plan PLAN (one)")
    plan_hash = ""
    if args.plan:
        plan = _read_plan(args.plan)
        plan_hash = plan.get("hash", "") if isinstance(plan, dict) else ""
        if not plan_hash:
            raise InvalidRequest(f"{args.plan} is not a migration plan")
    with make_client(args) as client:
        batch = client.rollback_migration(
            args.batch_id or "", plan_hash=plan_hash, rate_per_s=args.rate, requested_by=_me()
        )
        if args.follow:
            batch = _follow(client, batch.batch_id)
    print(dump(batch.__dict__) if args.json else _batch_text(batch))
    return 0


def _rate_and_follow(p: argparse.ArgumentParser) -> None:
    flag(
        p,
        "--rate",
        env="WIGGLE_RATE",
        type=float,
        default=0.0,
        show_default=False,
        help="instances per second (default: the server's, 50)",
    )
    flag(
        p,
        "--follow",
        env="WIGGLE_FOLLOW",
        action="store_true",
        help="print the progress until the batch ends",
    )


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "diff",
        help="what changed between two versions of a flow",
        description="Classify every node of two versions of a flow (unchanged, changed and "
        "which fields, moved into or out of a block, kind changed, added, removed) and list "
        "the edges added and removed. OLD and NEW are flow files, or deployed versions: NAME "
        "(the newest) or NAME@VERSION (in full, or the start of its digest).",
    )
    p.add_argument("old", metavar="OLD")
    p.add_argument("new", metavar="NEW")
    add_json_flag(p)
    add_connection_flags(p)
    p.set_defaults(handler=_diff)

    p = subparsers.add_parser(
        "migrate",
        help="move live instances to another version of their flow",
        description="Plan, from the diff of two versions, where every live token of a flow's "
        "instances goes (or why an instance is blocked); apply the plan as a durable batch, a "
        "canary first; roll it back (docs/migration.md).",
    )
    sub = p.add_subparsers(dest="migrate_command", required=True, metavar="COMMAND")
    q = sub.add_parser(
        "plan",
        help="write the plan for a flow's live instances",
        description="Read the live instances of FLOW and write the plan that moves them to "
        "--to: per instance, where each token goes or the blockers, with a summary. Changes "
        "nothing.",
    )
    q.add_argument("flow", metavar="FLOW")
    flag(
        q,
        "--to",
        env="WIGGLE_MIGRATE_TO",
        required=True,
        metavar="VERSION",
        help="the version to move to (in full, or the start of its digest)",
    )
    flag(
        q,
        "--from",
        dest="from_versions",
        env="WIGGLE_MIGRATE_FROM",
        action="append",
        metavar="VERSION",
        help="only instances on this version (repeatable; default: all)",
    )
    flag(
        q,
        "--filter",
        env="WIGGLE_FILTER",
        action="append",
        separator=";",
        metavar="COND",
        help="only instances matching these conditions (as wiggle list --where)",
    )
    flag(
        q,
        "--map",
        env="WIGGLE_MIGRATE_MAP",
        action="append",
        metavar="OLD=NEW",
        help="move tokens at node OLD to node NEW (a renamed or replaced node)",
    )
    flag(
        q,
        "--timers",
        env="WIGGLE_MIGRATE_TIMERS",
        default="keep",
        choices=("keep", "restart"),
        help="sleeps and await deadlines keep their absolute time, or restart with the new "
        "durations",
    )
    flag(
        q,
        "--children",
        env="WIGGLE_MIGRATE_CHILDREN",
        action="store_true",
        help="also plan running subflow children onto their flow's newest version",
    )
    q.add_argument(
        "-o",
        "--output",
        metavar="PLAN",
        help="where to write the plan (default FLOW-migration.json; - for stdout)",
    )
    add_json_flag(q)
    add_connection_flags(q)
    q.set_defaults(handler=_plan)

    q = sub.add_parser(
        "apply",
        help="apply a plan as a durable batch",
        description="Check PLAN (its hash, and that its instances have not moved since it was "
        "made) and start the batch that migrates them; wiggle batch status follows it.",
    )
    q.add_argument("plan", metavar="PLAN", help="the plan file (or - for stdin)")
    flag(
        q,
        "--limit",
        env="WIGGLE_MIGRATE_LIMIT",
        type=int,
        default=0,
        show_default=False,
        help="only the first N instances (a canary); apply the same plan again for the rest",
    )
    flag(
        q,
        "--skip-changed",
        env="WIGGLE_MIGRATE_SKIP_CHANGED",
        action="store_true",
        help="leave out instances that moved since the plan instead of refusing it",
    )
    _rate_and_follow(q)
    add_json_flag(q)
    add_connection_flags(q)
    q.set_defaults(handler=_apply)

    q = sub.add_parser(
        "rollback",
        help="restore what a migration batch moved",
        description="Restore every instance migration BATCH moved (or every batch that "
        "applied --plan PLAN: its canary and the rest) that has not advanced since; the others "
        "are listed with the reason.",
    )
    q.add_argument("batch_id", metavar="BATCH", nargs="?")
    q.add_argument("--plan", metavar="PLAN", help="roll back what applying this plan file did")
    _rate_and_follow(q)
    add_json_flag(q)
    add_connection_flags(q)
    q.set_defaults(handler=_rollback)
