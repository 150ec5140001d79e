"""`wiggle schedule`: apply schedule documents to a server, and list, describe, pause, unpause,
trigger and delete schedules (docs/schedules.md).

`apply` checks every file here first (each problem at FILE:LINE:COL, no server needed), then
that each schedule's flow is registered, and only then applies them, so a broken file applies
nothing. The server checks each document again, and that its flow takes the input.
"""

from __future__ import annotations

import argparse
import datetime
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from wiggle.cli._options import (
    add_connection_flags,
    add_json_flag,
    add_subcommand,
    flag,
    make_client,
)
from wiggle.cli._output import counted, dump
from wiggle.errors import Diagnostic, FlowError, InvalidRequest

if TYPE_CHECKING:
    from wiggle.client import AppliedSchedule, Client, ScheduleFire, ScheduleInfo
    from wiggle.schedules import Schedule

__all__ = ["register"]

#: How many next fire times and last fires `describe` shows.
UPCOMING = 10
RECENT = 20


# -- formatting -----------------------------------------------------------------------------------


def _zone(name: str) -> datetime.tzinfo:
    from zoneinfo import ZoneInfo

    try:
        return ZoneInfo(name)
    except Exception:  # a zone this machine does not know: UTC, which says so by its offset
        return datetime.UTC


def _local(ms: int | None, zone: str) -> str:
    """An instant as RFC 3339 in `zone`, with its offset, to the second; "-" for None."""
    if ms is None:
        return "-"
    at = datetime.datetime.fromtimestamp(ms / 1000, _zone(zone))
    return at.isoformat(timespec="seconds")


def _timetable(document: dict[str, Any]) -> str:
    """What a schedule's timetable is, in one line, as its document writes it."""
    parts = []
    crons = document.get("cron")
    for cron in [crons] if isinstance(crons, str) else crons or []:
        parts.append(f"cron {cron!r}")
    intervals = document.get("interval")
    for every in [intervals] if isinstance(intervals, dict) else intervals or []:
        offset = f" offset {every['offset']}" if every.get("offset") else ""
        parts.append(f"every {every.get('every')}{offset}")
    if document.get("calendar"):
        parts.append(counted(len(document["calendar"]), "calendar entry", "calendar entries"))
    if document.get("except"):
        parts.append(f"except {counted(len(document['except']), 'entry', 'entries')}")
    return ", ".join(parts) or "-"


def _state(s: ScheduleInfo) -> str:
    if not s.paused:
        return "active"
    return f"paused ({s.note})" if s.note else "paused"


def _fire_line(f: ScheduleFire, zone: str) -> str:
    when = _local(f.nominal_ms, zone)
    if f.count > 1:
        when = f"{when} .. {_local(f.until_ms, zone)} ({f.count} times)"
    what = f.instance_id or ""
    if f.reason:
        what = f"{what}: {f.reason}" if what else f.reason
    if f.triggered:
        what += " (triggered)"
    return f"  {when}  {f.outcome:<8} {what}".rstrip()


def _describe_text(s: ScheduleInfo) -> str:
    doc = s.document
    lines = [f"schedule  {s.name}"]
    if doc.get("description"):
        lines.append(f"about     {doc['description']}")
    version = doc.get("version", "latest")
    lines += [
        f"flow      {s.flow}" + ("" if version == "latest" else f" {version}"),
        f"state     {_state(s)}",
        f"zone      {s.time_zone}",
        f"timetable {_timetable(doc)}",
        f"overlap   {doc.get('overlap', 'skip')}",
        f"fired     {counted(s.fired, 'instance')} started, "
        f"{counted(s.skipped, 'nominal time')} skipped, {s.buffered} buffered",
    ]
    if s.running_instance_id:
        lines.append(f"last run  {s.running_instance_id}")
    if s.paused:
        lines.append("next      none while paused (wiggle schedule unpause " + s.name + ")")
    elif s.upcoming:
        lines.append(f"next {counted(len(s.upcoming), 'fire')} ({s.time_zone})")
        lines.extend(f"  {at}" for at in s.upcoming)
    else:
        lines.append("next      none: its timetable has no time left")
    if s.recent:
        lines.append(f"last {counted(len(s.recent), 'fire')}, newest first ({s.time_zone})")
        lines.extend(_fire_line(f, s.time_zone) for f in s.recent)
    else:
        lines.append("last      no fire yet")
    return "\n".join(lines)


def _list_text(found: list[ScheduleInfo]) -> str:
    rows = [
        (
            s.name,
            s.flow,
            "paused" if s.paused else "active",
            _local(s.next_due_ms, s.time_zone),
            s.time_zone,
            str(s.fired),
            str(s.skipped),
            s.running_instance_id or "-",
        )
        for s in found
    ]
    header = ("SCHEDULE", "FLOW", "STATE", "NEXT FIRE", "ZONE", "FIRED", "SKIPPED", "LAST RUN")
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join(fmt.format(*r).rstrip() for r in [header, *rows])


def _applied_text(a: AppliedSchedule) -> str:
    if a.created:
        what = "created"
    elif a.changed:
        what = f"changed: {', '.join(a.changed)}"
    else:
        return f"{a.name} unchanged"
    nxt = f"next fire {a.next_due}" if a.next_due else "no fire due (paused, or past its end)"
    return f"{a.name} {what}; {nxt}"


# -- apply ----------------------------------------------------------------------------------------


def _load_all(paths: list[str]) -> list[tuple[str, Schedule]]:
    """Every file checked, or one FlowError with every problem of every file."""
    from wiggle.schedules import load_schedule_file

    loaded = []
    problems: list[Diagnostic] = []
    for path in paths:
        try:
            loaded.append((path, load_schedule_file(path)))
        except FlowError as exc:
            problems.extend(exc.diagnostics)
    if problems:
        raise FlowError(problems)
    seen: dict[str, str] = {}
    for path, schedule in loaded:
        if schedule.name in seen:
            raise InvalidRequest(
                f"schedule {schedule.name!r} is in both {seen[schedule.name]} and {path}: "
                "apply one of them"
            )
        seen[schedule.name] = path
    return loaded


def _flow_position(path: str) -> tuple[int, int]:
    """Where a schedule file names its flow (0, 0 when it cannot be read again)."""
    from wiggle.compiler import load_document

    try:
        with open(path, "rb") as f:
            return load_document(f.read(), path).source.value(("flow",))
    except Exception:
        return 0, 0


def _check_flows(client: Client, loaded: list[tuple[str, Schedule]]) -> None:
    """Every schedule's flow (its pinned version) is registered: FlowError otherwise, so that
    nothing is applied when one would be refused."""
    registered: dict[str, set[str]] = {}
    problems = []
    for path, schedule in loaded:
        if schedule.flow not in registered:
            found = client.list_definitions(schedule.flow)
            registered[schedule.flow] = {d.version for d in found if d.name == schedule.flow}
        versions = registered[schedule.flow]
        if versions and (schedule.version is None or schedule.version in versions):
            continue
        pinned = f" at version {schedule.version}" if schedule.version else ""
        line, column = _flow_position(path)
        problems.append(
            Diagnostic(
                path,
                line,
                column,
                f"flow {schedule.flow!r}{pinned} is not registered on the server; deploy it "
                "first (wiggle deploy FLOW)",
            )
        )
    if problems:
        raise FlowError(problems)


def _apply(args: argparse.Namespace) -> int:
    loaded = _load_all(args.files)  # nothing is applied when one is broken
    results = []
    with make_client(args) as client:
        _check_flows(client, loaded)
        for path, _schedule in loaded:
            applied = client.apply_schedule(path)
            results.append({"file": path, **asdict(applied)})
            if not args.json:
                print(_applied_text(applied), flush=True)
    if args.json:
        print(dump(results))
    return 0


# -- the others -----------------------------------------------------------------------------------


def _list(args: argparse.Namespace) -> int:
    with make_client(args) as client:
        found = client.list_schedules(args.flow)
    if args.json:
        print(dump({"schedules": [asdict(s) for s in found]}))
    elif not found:
        print(f"no schedule of flow {args.flow!r}" if args.flow else "no schedule yet")
    else:
        print(_list_text(found))
    return 0


def _describe(args: argparse.Namespace) -> int:
    with make_client(args) as client:
        s = client.describe_schedule(args.name, upcoming=UPCOMING, recent=RECENT)
    print(dump(asdict(s)) if args.json else _describe_text(s))
    return 0


def _pause(args: argparse.Namespace) -> int:
    with make_client(args) as client:
        s = client.pause_schedule(args.name, args.note or "")
    if args.json:
        print(dump(asdict(s)))
    else:
        print(f"{s.name} paused" + (f": {s.note}" if s.note else ""))
    return 0


def _unpause(args: argparse.Namespace) -> int:
    with make_client(args) as client:
        s = client.unpause_schedule(args.name)
    if args.json:
        print(dump(asdict(s)))
    else:
        nxt = f"next fire {_local(s.next_due_ms, s.time_zone)}" if s.next_due_ms else "no fire due"
        print(f"{s.name} unpaused; {nxt}")
    return 0


def _trigger(args: argparse.Namespace) -> int:
    with make_client(args) as client:
        fire = client.trigger_schedule(args.name)
    if args.json:
        print(dump(asdict(fire)))
    elif fire.outcome == "STARTED":
        print(f"{args.name} fired: started {fire.instance_id}")
    else:
        print(f"{args.name} fired: {fire.outcome.lower()} ({fire.reason})")
    return 0


def _delete(args: argparse.Namespace) -> int:
    with make_client(args) as client:
        client.delete_schedule(args.name)
    if args.json:
        print(dump({"deleted": args.name}))
    else:
        print(f"{args.name} deleted (the instances it started are left alone)")
    return 0


def _instant_arg(text: str) -> int:
    """--from / --to: an RFC 3339 instant (with Z or an offset), in milliseconds."""
    try:
        at = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an instant: write RFC 3339, e.g. 2026-10-01T00:00:00Z"
        ) from None
    if at.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} has no offset: add Z or +HH:MM")
    return int(at.timestamp() * 1000)


#: How many of a backfill's times the preview shows at each end.
SHOWN = 5


def _backfill(args: argparse.Namespace) -> int:
    with make_client(args) as client:
        if not args.yes:
            preview = client.preview_backfill(args.name, args.start, args.end)
            if args.json:
                print(dump(asdict(preview)))
                return 0
            times = [_local(n, preview.time_zone) for n in preview.nominal_ms]
            lines = [
                f"{args.name}: {len(times)} nominal times to fire "
                f"({preview.already} in the range already decided, left alone)"
            ]
            shown = times if len(times) <= 2 * SHOWN else [*times[:SHOWN], "...", *times[-SHOWN:]]
            lines += [f"  {t}" for t in shown]
            lines.append("nothing changed; add --yes to start the backfill")
            print("\n".join(lines))
            return 0
        batch = client.start_backfill(
            args.name,
            args.start,
            args.end,
            overlap=args.overlap,
            rate_per_s=args.rate or 0.0,
        )
    if args.json:
        print(dump(asdict(batch)))
    else:
        print(f"backfill of {args.name}: {batch.matched} nominal times, batch {batch.batch_id}")
        print(f"follow it: wiggle batch status {batch.batch_id}")
    return 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "schedule",
        help="schedules: apply, list, describe, pause, unpause, trigger, backfill, delete",
        description="Schedules start a flow on a timetable (docs/schedules.md): a "
        "<name>.schedule.yaml document, applied to a server, whose leader fires it.",
    )
    sub = p.add_subparsers(dest="schedule_command", required=True, metavar="COMMAND")

    def finish(q: argparse.ArgumentParser) -> None:
        add_json_flag(q)
        add_connection_flags(q)

    q = add_subcommand(
        sub,
        "apply",
        "create or update schedules from their files",
        "Check every FILE here (each problem at FILE:LINE:COL), then that each schedule's flow "
        "is registered on the server, then create or update each schedule: prints 'created', "
        "'unchanged' or 'changed: FIELD, ...' and its next fire. Nothing is applied when a "
        "file is broken or names a flow the server does not have. Updating a schedule keeps "
        "its record of fires: no nominal time fires twice.",
        _apply,
    )
    q.add_argument("files", nargs="+", metavar="FILE", help="schedule files (.schedule.yaml)")
    finish(q)

    q = add_subcommand(
        sub,
        "list",
        "every schedule: its flow, state, next fire",
        "Every schedule on the server, by name: its flow, whether it is paused, its next fire "
        "in its zone, how many instances it started and nominal times it skipped, and the "
        "instance of its last start.",
        _list,
    )
    flag(q, "--flow", env="WIGGLE_FLOW", metavar="FLOW", help="only the schedules of this flow")
    finish(q)

    q = add_subcommand(
        sub,
        "describe",
        "one schedule: next fire times, last fires, skips and why",
        f"One schedule: its timetable, its next {UPCOMING} fire times in its zone, its last "
        f"{RECENT} fires with the instances they started, the nominal times it skipped with "
        "how many and why, and whether it is paused and why.",
        _describe,
    )
    q.add_argument("name", metavar="NAME", help="the schedule's name")
    finish(q)

    q = add_subcommand(
        sub,
        "pause",
        "stop a schedule firing until it is unpaused",
        "Pause a schedule: nothing fires until it is unpaused (wiggle schedule trigger still "
        "fires it). Pausing a paused schedule changes only its note.",
        _pause,
    )
    q.add_argument("name", metavar="NAME", help="the schedule's name")
    flag(q, "--note", env="WIGGLE_NOTE", metavar="TEXT", help="why; describe shows it")
    finish(q)

    q = add_subcommand(
        sub,
        "unpause",
        "let a paused schedule fire again",
        "Unpause a schedule: its timetable goes on from now. The nominal times that passed "
        "while it was paused are recorded as skipped, never caught up.",
        _unpause,
    )
    q.add_argument("name", metavar="NAME", help="the schedule's name")
    finish(q)

    q = add_subcommand(
        sub,
        "trigger",
        "fire a schedule now, once",
        "Fire a schedule now, once, paused or not, under its overlap policy: the nominal time "
        "is now, to the second, and the instance <schedule>-<that time in UTC>. Prints the "
        "instance started, or why the fire was buffered or skipped (exit 0 either way).",
        _trigger,
    )
    q.add_argument("name", metavar="NAME", help="the schedule's name")
    finish(q)

    q = add_subcommand(
        sub,
        "backfill",
        "fire a past range of a schedule's nominal times",
        "Fire the nominal times of a schedule between --from and --to (both included, not "
        "after now) that are not decided yet, each once, as a durable bulk action the leading "
        "server works through (and a new leader resumes); a time the timetable, a trigger or "
        "another backfill decided is left alone. Without --yes, shows what it would fire and "
        "changes nothing. At most 10,000 times per backfill.",
        _backfill,
    )
    q.add_argument("name", metavar="NAME", help="the schedule's name")
    q.add_argument(
        "--from", dest="start", required=True, type=_instant_arg, metavar="INSTANT",
        help="the range's first instant, RFC 3339 (2026-10-01T00:00:00Z)",
    )  # fmt: skip
    q.add_argument(
        "--to", dest="end", required=True, type=_instant_arg, metavar="INSTANT",
        help="the range's last instant, RFC 3339, not after now",
    )  # fmt: skip
    q.add_argument(
        "--overlap", choices=("allow_all", "skip"), default="allow_all",
        help="allow_all: every time starts (default); skip: a time is skipped while the "
        "schedule's last instance runs",
    )  # fmt: skip
    q.add_argument(
        "--rate", type=float, default=None, metavar="N",
        help="instances per second (default 50)",
    )  # fmt: skip
    q.add_argument("--yes", action="store_true", help="start it (else: only show the preview)")
    finish(q)

    q = add_subcommand(
        sub,
        "delete",
        "delete a schedule and its record of fires",
        "Delete a schedule and its record of fires. The instances it started are left alone.",
        _delete,
    )
    q.add_argument("name", metavar="NAME", help="the schedule's name")
    finish(q)
