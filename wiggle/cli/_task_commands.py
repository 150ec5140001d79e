"""`wiggle task`: list, show, claim, unclaim, complete and reassign human tasks
(docs/human-tasks.md).

On a server with credentials the person is the credential (`--token`): its name, and the groups
the credentials file gives it. On a server without credentials, `--as PERSON` and `--group`
say who acts, and `--admin` acts as an admin.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from wiggle.cli._options import (
    add_connection_flags,
    add_json_flag,
    add_subcommand,
    flag,
    make_client,
    parse_json,
)
from wiggle.cli._output import dump, instant

if TYPE_CHECKING:
    from wiggle.client import HumanTask, TaskAnswer

__all__ = ["register"]

STATES = ("OPEN", "CLAIMED", "COMPLETED", "CANCELLED", "EXPIRED")


def _at(ms: int | None) -> str:
    return "-" if ms is None else instant(ms)


def _who(args: argparse.Namespace) -> dict[str, Any]:
    return {"person": args.person or "", "groups": args.group or [], "admin": bool(args.admin)}


def _for_whom(t: HumanTask) -> str:
    parts = []
    if t.assignee:
        parts.append(t.assignee)
    parts += t.candidate_people
    parts += [f"group {g}" for g in t.candidate_groups]
    return ", ".join(parts) or "-"


def _list_text(found: list[HumanTask]) -> str:
    rows = [
        (t.task_id, t.state, _at(t.due_at_ms), t.flow, t.node_id, t.instance_id, t.title)
        for t in found
    ]
    header = ("TASK", "STATE", "DUE", "FLOW", "STEP", "INSTANCE", "TITLE")
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join(fmt.format(*r).rstrip() for r in [header, *rows])


def _show_text(t: HumanTask) -> str:
    lines = [
        f"task      {t.task_id}",
        f"title     {t.title}",
    ]
    if t.instructions:
        lines.append(f"about     {t.instructions}")
    lines += [
        f"state     {t.state}"
        + (f" by {t.claimed_by}" if t.claimed_by else "")
        + (f" by {t.completed_by} at {_at(t.completed_at_ms)}" if t.completed_by else ""),
        f"instance  {t.instance_id} ({t.flow}, step {t.node_id})",
        f"for       {_for_whom(t)}",
        f"excluded  {', '.join(t.excluded) or '-'}",
        f"approvals {len(t.approved)} of {t.approvals}",
        f"due       {_at(t.due_at_ms)}",
        f"deadline  {_at(t.deadline_at_ms)}",
        f"created   {_at(t.created_at_ms)}",
        f"reminded  {_reminded(t)}",
    ]
    if t.actions:
        lines.append("actions")
        lines += [f"  {_at(a.at_ms)}  {a.actor}  {a.action}" for a in t.actions]
    return "\n".join(lines)


def _reminded(t: HumanTask) -> str:
    """`2 times (last 2026-...Z); next 2026-...Z`, `never; next ...`, `never`."""
    text = "never"
    if t.reminded_count:
        times = "once" if t.reminded_count == 1 else f"{t.reminded_count} times"
        text = f"{times} (last {_at(t.last_reminded_at_ms)})"
    if t.next_remind_at_ms:
        text += f"; next {_at(t.next_remind_at_ms)}"
    return text


def _answer_text(done: str, got: TaskAnswer) -> str:
    """`done`: claimed, unclaimed or completed."""
    t = got.task
    again = " (already done: this request id was used)" if got.replayed else ""
    if done == "completed":
        if got.completed:
            return f"{t.task_id} completed{again}"
        return f"{t.task_id} answered: {len(t.approved)} of {t.approvals} approvals{again}"
    return f"{t.task_id} {done}: {t.state}{again}"


def _print(args: argparse.Namespace, value: Any, text: str) -> None:
    print(dump(asdict(value)) if args.json else text)


def _list(args: argparse.Namespace) -> int:
    with make_client(args) as client:
        found = client.list_tasks(
            states=args.state or [],
            all_states=args.all,
            instance_id=args.instance or "",
            limit=args.limit,
            **_who(args),
        )
    if args.json:
        print(dump({"tasks": [asdict(t) for t in found]}))
    elif not found:
        print("no task")
    else:
        print(_list_text(found))
    return 0


def _show(args: argparse.Namespace) -> int:
    with make_client(args) as client:
        t = client.get_task(args.task_id, **_who(args))
    _print(args, t, _show_text(t))
    return 0


def _claim(args: argparse.Namespace) -> int:
    with make_client(args) as client:
        got = client.claim_task(args.task_id, request_id=args.request_id or "", **_who(args))
    _print(args, got, _answer_text("claimed", got))
    return 0


def _unclaim(args: argparse.Namespace) -> int:
    with make_client(args) as client:
        got = client.unclaim_task(args.task_id, request_id=args.request_id or "", **_who(args))
    _print(args, got, _answer_text("unclaimed", got))
    return 0


def _complete(args: argparse.Namespace) -> int:
    answer = parse_json(args.answer, "the answer")
    with make_client(args) as client:
        got = client.complete_task(
            args.task_id, answer, request_id=args.request_id or "", **_who(args)
        )
    _print(args, got, _answer_text("completed", got))
    return 0


def _reassign(args: argparse.Namespace) -> int:
    who = _who(args)
    with make_client(args) as client:
        got = client.reassign_task(
            args.task_id,
            args.to,
            request_id=args.request_id or "",
            person=who["person"],
            admin=True,
        )
    _print(args, got, f"{got.task.task_id} reassigned to {got.task.assignee}")
    return 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "task",
        help="human tasks: list, show, claim, unclaim, complete, reassign",
        description="The tasks of human steps (docs/human-tasks.md). The person acting is the "
        "credential (--token); on a server without credentials, --as and --group say who.",
    )
    sub = p.add_subparsers(dest="task_command", required=True, metavar="COMMAND")

    def finish(q: argparse.ArgumentParser, *, request_id: bool = True) -> None:
        flag(
            q,
            "--as",
            dest="person",
            env="WIGGLE_PERSON",
            metavar="PERSON",
            help="who acts, on a server without credentials (with credentials: the "
            "credential's name, and another is refused)",
        )
        flag(
            q,
            "--group",
            env="WIGGLE_GROUPS",
            action="append",
            metavar="GROUP",
            help="a group the person is a member of, on a server without credentials (repeatable)",
        )
        flag(
            q,
            "--admin",
            env="WIGGLE_TASK_ADMIN",
            action="store_true",
            help="act as an admin: any task (needs the admin or operator scope)",
        )
        if request_id:
            flag(
                q,
                "--request-id",
                env="WIGGLE_REQUEST_ID",
                metavar="ID",
                help="makes the action idempotent: the same id again applies nothing",
            )
        add_json_flag(q)
        add_connection_flags(q)

    q = add_subcommand(
        sub,
        "list",
        "the tasks you may act on, soonest due first",
        "The open tasks the person may act on (and those they acted on), soonest due first; "
        "--admin: every task.",
        _list,
    )
    q.add_argument("--state", action="append", choices=STATES, help="only tasks in this state")
    q.add_argument("--all", action="store_true", help="tasks in every state")
    q.add_argument("--instance", metavar="ID", help="only the tasks of this instance")
    q.add_argument("--limit", type=int, default=100, help="at most this many (default 100)")
    finish(q, request_id=False)

    q = add_subcommand(
        sub, "show", "one task and its audit trail", "One task with its audit trail.", _show
    )
    q.add_argument("task_id", metavar="TASK")
    finish(q, request_id=False)

    q = add_subcommand(
        sub,
        "claim",
        "take a task: until released, only you may answer it",
        "Claim a task: until it is released, only you (or an admin) may answer it.",
        _claim,
    )
    q.add_argument("task_id", metavar="TASK")
    finish(q)

    q = add_subcommand(
        sub, "unclaim", "give a claimed task back", "Release a task you claimed.", _unclaim
    )
    q.add_argument("task_id", metavar="TASK")
    finish(q)

    q = add_subcommand(
        sub,
        "complete",
        "answer a task",
        "Answer a task with ANSWER (JSON, or @FILE): checked against the task's form; the "
        "answer that completes it reaches the flow.",
        _complete,
    )
    q.add_argument("task_id", metavar="TASK")
    q.add_argument("answer", metavar="ANSWER", help="the answer: JSON, or @FILE")
    finish(q)

    q = add_subcommand(
        sub,
        "reassign",
        "make another person a task's assignee (admin)",
        "Make PERSON the task's assignee; a claim on it is released. Needs the admin or "
        "operator scope.",
        _reassign,
    )
    q.add_argument("task_id", metavar="TASK")
    q.add_argument("to", metavar="PERSON")
    finish(q)
