"""What the commands print: progress lines, the status view, tables, JSON documents.

People get aligned text; `--json` gets one JSON document on stdout. Errors with `--json` are a
document too: `{"error": {"code": ..., "message": ...}}`.
"""

from __future__ import annotations

import datetime
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from wiggle.client import DefinitionSummary, Event, Instance, WorkerInfo

__all__ = [
    "EventPrinter",
    "counted",
    "definitions_table",
    "describe_text",
    "dump",
    "error_document",
    "instance_json",
    "instances_table",
    "workers_table",
]


def counted(n: int, noun: str, plural: str = "") -> str:
    """`1 instance`, `3 instances`: a count with its noun in the number it needs."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def dump(value: Any) -> str:
    return orjson.dumps(value).decode()


def instant(ms: int) -> str:
    """An epoch-milliseconds time as an RFC 3339 UTC instant, to the second."""
    at = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


_instant = instant


def _ago(ms: int, now_ms: int) -> str:
    s = max(now_ms - ms, 0) // 1000
    if s < 120:
        return f"{s} s ago"
    if s < 7200:
        return f"{s // 60} min ago"
    return f"{s // 3600} h ago"


_MARKS = {
    "step_completed": ("✓", "+"),
    "step_failed": ("✗", "x"),
    "step_retried": ("↻", "r"),
}


class EventPrinter:
    """Prints each new event of an instance once, as one line: `  ✓ validate (attempt 1)`.

    A step of a branch names it (`item 3` of a for_each, or the fork's branch name), and a
    predicate's line shows its outcome (`→ false`).
    """

    def __init__(self, out: Any = None) -> None:
        self._out = out
        self._seen = 0
        encoding = getattr(out or sys.stdout, "encoding", None) or "ascii"
        try:
            "✓✗↻·→".encode(encoding)
            self._fancy = True
        except (UnicodeEncodeError, LookupError):
            self._fancy = False

    def line(self, event: Event) -> str:
        detail = event.detail if isinstance(event.detail, dict) else {}
        marks = _MARKS.get(event.kind)
        if marks is None:  # not a step outcome: name the event, then what it is about
            text = f"  {'·' if self._fancy else '-'} {event.kind.replace('_', ' ')}"
            if event.node_id:
                text += f" {event.node_id}"
        else:
            text = f"  {marks[0] if self._fancy else marks[1]} {event.node_id}"
            if isinstance(detail.get("predicate"), bool):
                arrow = "→" if self._fancy else "->"
                text += f" {arrow} {'true' if detail['predicate'] else 'false'}"
            notes = []
            branch = detail.get("branch")
            if isinstance(branch, str):
                notes.append(f"item {branch}" if branch.isdigit() else f"branch {branch}")
            if event.attempt:
                notes.append(f"attempt {event.attempt}")
            if notes:
                text += f" ({', '.join(notes)})"
        message = detail.get("message")
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
    at = datetime.datetime.fromtimestamp(event.at_ms / 1000, tz=datetime.UTC)
    row = f"  #{event.seq:<3} {at:%H:%M:%S}.{event.at_ms % 1000:03d}  {event.kind:<18}"
    if event.node_id:
        row += f" {event.node_id}"
    if event.attempt:
        row += f"  attempt {event.attempt}"
    detail = event.detail if isinstance(event.detail, dict) else {}
    message = detail.get("message")
    if isinstance(message, str) and message:
        row += f"  {message}"
    return row.rstrip()


def describe_text(view: Instance, *, events: bool) -> str:
    """The status view: identity, the current context, then one line per live token with the
    sentence that says what it waits for, and its own context."""
    lines = [
        f"instance  {view.instance_id}",
        f"flow      {view.flow} {view.version}",
        f"status    {view.status}" + (f" ({view.reason})" if view.reason else ""),
        f"mode      {view.execution_mode}",
        f"started   {_instant(view.created_at_ms)}"
        + (f" by {view.started_by}" if view.started_by else ""),
    ]
    if view.parent_instance_id:
        lines.append(f"parent    {view.parent_instance_id}")
    if view.child_instance_ids:
        lines.append(f"children  {', '.join(view.child_instance_ids)}")
    if view.search:
        shown = "  ".join(f"{k}={dump(v)}" for k, v in sorted(view.search.items()))
        lines.append(f"search    {shown}")
    if view.input is not None:
        lines.append(f"input     {dump(view.input)}")
    where = f" (at {view.current_node})" if view.current_node else ""
    lines.append(f"context   {dump(view.context)}{where}")
    live = [t for t in view.tokens if t.state != "DONE"]
    if live:
        lines.append("tokens")
        for t in live:
            branch = f" [{t.branch}]" if t.branch else ""
            lines.append(f"  {t.node_id}{branch}  {t.state}")
            if t.explanation:
                lines.append(f"      {t.explanation}")
            lines.append(f"      context {dump(t.context)}")
    if events and view.events:
        lines.append("events")
        lines.extend(_event_row(e) for e in view.events)
    return "\n".join(lines)


def instance_json(view: Instance) -> dict[str, Any]:
    return asdict(view)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join(fmt.format(*r).rstrip() for r in [header, *rows])


def instances_table(instances: Sequence[Instance]) -> str:
    rows = [
        (
            i.instance_id,
            i.flow,
            i.status,
            i.current_node,
            _instant(i.created_at_ms),
            i.version.removeprefix("sha256:")[:12],
            i.reason[:60],
        )
        for i in instances
    ]
    header = ("INSTANCE", "FLOW", "STATUS", "STEP", "STARTED", "VERSION", "REASON")
    return _table(header, rows)


def workers_table(workers: Sequence[WorkerInfo], now_ms: int) -> str:
    rows = [
        (
            w.worker_id,
            ",".join(w.queues),
            ",".join(w.activities) if w.activities else "(any)",
            str(w.slots),
            w.sdk,
            _ago(w.last_poll_ms, now_ms),
        )
        for w in workers
    ]
    return _table(("WORKER", "QUEUES", "ACTIVITIES", "SLOTS", "SDK", "LAST POLL"), rows)


def definitions_table(definitions: Sequence[DefinitionSummary]) -> str:
    rows = [
        (
            d.name,
            d.version,
            d.execution_mode,
            _instant(d.registered_at_ms),
            " ".join(f"{k.lower()} {v}" for k, v in d.instance_counts.items() if v),
        )
        for d in definitions
    ]
    return _table(("FLOW", "VERSION", "MODE", "REGISTERED", "INSTANCES"), rows)


def error_document(code: str, message: str) -> str:
    return dump({"error": {"code": code, "message": message}})
