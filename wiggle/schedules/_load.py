"""Schedule documents: text → a checked `Schedule`, or every problem as FILE:LINE:COL.

The document is read like a flow (the same YAML/JSON loader: anchors, tags, duplicate keys and
hostile nesting are refused the same way), checked against `schedule.schema.json`, then each
field the schema cannot judge: cron expressions (by cronsim), the time zone (by zoneinfo, from
the tzdata package where the system has no zone files), durations, value ranges, dates, the
start before the end, and each `input_values` expression (by the CEL profile's compiler).
Whether the flow exists and takes the input is checked where flows are registered, when the
schedule is applied.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterator
from datetime import date, datetime
from importlib import resources
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from wiggle._limits import depth_problem
from wiggle.compiler import (
    MAX_BYTES,
    DocumentPath,
    SourceMap,
    load_document,
    parse_duration,
    schema_diagnostics,
)
from wiggle.errors import Diagnostic, FlowError
from wiggle.expressions import ExpressionInvalid, compile_expression
from wiggle.schedules._model import DAY_NAMES, Calendar, CatchUp, Exclusion, Schedule, Spec

__all__ = [
    "SCHEDULE_SUFFIXES",
    "load_schedule",
    "load_schedule_file",
    "load_stored",
    "schedule_schema",
]

#: How a schedule file is named: `<name>.schedule.yaml` (or .yml, .json).
SCHEDULE_SUFFIXES = (".schedule.yaml", ".schedule.yml", ".schedule.json")

_ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

_RANGES = {
    "seconds": (0, 59),
    "minutes": (0, 59),
    "hours": (0, 23),
    "days_of_month": (1, 31),
    "months": (1, 12),
}


@functools.cache
def schedule_schema() -> dict[str, Any]:
    """The parsed schedule.schema.json (package data, a copy of spec/schema/)."""
    text = resources.files("wiggle.schedules").joinpath("schema", "schedule.schema.json")
    doc: dict[str, Any] = json.loads(text.read_text("utf-8"))
    return doc


@functools.cache
def _validator() -> Any:
    import jsonschema  # type: ignore[import-untyped,unused-ignore]

    return jsonschema.Draft202012Validator(schedule_schema())


def load_schedule_file(path: str | os.PathLike[str]) -> Schedule:
    """Read and check a schedule file; FlowError names every problem."""
    name = os.fspath(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise FlowError([Diagnostic(name, 0, 0, f"cannot read: {exc.strerror}")]) from None
    return load_schedule(raw[: MAX_BYTES + 1], name)


def load_schedule(source: str | bytes, file: str = "<schedule>") -> Schedule:
    """Check one schedule document; FlowError names every problem, each located."""
    loaded = load_document(source, file)
    return _checked(loaded.value, loaded.source)


def _checked(value: Any, source: SourceMap) -> Schedule:
    problems = schema_diagnostics(_validator(), value, source)
    if problems:
        raise FlowError(problems)
    check = _Checker(source)
    schedule = check.schedule(value)
    if check.problems:
        raise FlowError(sorted(check.problems))
    assert schedule is not None
    return schedule


@functools.lru_cache(maxsize=1024)
def load_stored(document: str) -> Schedule:
    """A document as a server stores it (checked when it was applied), cached by its text: the
    leader and every read of a schedule parse each stored document once. A stored document is
    canonical JSON, so it is read as JSON: the YAML reader, which keeps every position for error
    messages, costs ten times as much, and a new leader reads every schedule it fires."""
    return _checked(json.loads(document), SourceMap("<stored schedule>"))


class _Checker:
    def __init__(self, source: SourceMap) -> None:
        self.source = source
        self.problems: list[Diagnostic] = []

    def problem(self, path: DocumentPath, message: str) -> None:
        line, column = self.source.value(path)
        pointer = "".join(f"/{p}" for p in path)
        self.problems.append(Diagnostic(self.source.file, line, column, message, pointer))

    def duration(self, path: DocumentPath, text: str) -> int:
        try:
            return parse_duration(text)
        except ValueError as exc:
            self.problem(path, str(exc))
            return 1000

    def schedule(self, doc: dict[str, Any]) -> Schedule | None:
        zone = self.zone(doc.get("time_zone", "UTC"))
        dst = doc.get("dst", {})
        catch = doc.get("catch_up", {})
        if "at_most" in catch and catch.get("missed", "latest") != "all":
            self.problem(("catch_up", "at_most"), "at_most applies only with missed: all")
        window = (
            self.duration(("catch_up", "window"), catch["window"]) if "window" in catch else None
        )
        start = self.instant(("start",), doc["start"]) if "start" in doc else None
        end = self.instant(("end",), doc["end"]) if "end" in doc else None
        if start is not None and end is not None and end <= start:
            self.problem(("end",), f"end {doc['end']} is not after start {doc['start']}")
        spec = Spec(
            zone=zone or ZoneInfo("UTC"),
            crons=tuple(self.crons(doc.get("cron"))),
            calendars=tuple(
                self.calendar(("calendar", i), entry)
                for i, entry in enumerate(doc.get("calendar", []))
            ),
            intervals=tuple(self.intervals(doc.get("interval"))),
            exclusions=tuple(
                self.exclusion(("except", i), entry)
                for i, entry in enumerate(doc.get("except", []))
            ),
            start_ms=start,
            end_ms=end,
            jitter_ms=self.duration(("jitter",), doc["jitter"]) if "jitter" in doc else 0,
            skipped=dst.get("skipped", "after"),
            repeated=dst.get("repeated", "first"),
        )
        data = doc.get("input", {})
        problem = depth_problem("the input", data)
        if problem:
            self.problem(("input",), problem)
        values = doc.get("input_values", {})
        if values and not isinstance(data, dict):
            self.problem(("input_values",), "input_values needs an object input to set keys of")
        for key, text in sorted(values.items()):
            try:
                compile_expression(text)
            except ExpressionInvalid as exc:
                for p in exc.problems:
                    self.problem(
                        ("input_values", key), f"{p.message} (at {p.line}:{p.column} of {text!r})"
                    )
        version = doc.get("version", "latest")
        return Schedule(
            name=doc["schedule"],
            flow=doc["flow"],
            version=None if version == "latest" else version,
            spec=spec,
            overlap=doc.get("overlap", "skip"),
            catch_up=CatchUp(catch.get("missed", "latest"), window, catch.get("at_most")),
            paused=bool(doc.get("paused", False)),
            input=data,
            input_values=tuple(sorted(values.items())),
            description=doc.get("description", ""),
            document=doc,
        )

    def zone(self, name: str) -> ZoneInfo | None:
        try:
            if ".." in name or name.startswith("/"):
                raise ValueError(name)
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            self.problem(
                ("time_zone",),
                f"unknown time zone {name!r}: use an IANA name such as Europe/Berlin or UTC",
            )
            return None

    def instant(self, path: DocumentPath, text: str) -> int | None:
        try:
            return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
        except ValueError:
            self.problem(path, f"{text!r} is not a valid instant")
            return None

    def crons(self, value: str | list[str] | None) -> Iterator[str]:
        if value is None:
            return
        many = isinstance(value, list)
        for i, text in enumerate(value if isinstance(value, list) else [value]):
            path: DocumentPath = ("cron", i) if many else ("cron",)
            expression = _ALIASES.get(text.strip().lower(), text.strip())
            if expression.startswith("@"):
                known = ", ".join(_ALIASES)
                self.problem(path, f"unknown cron alias {text!r}: one of {known}")
                continue
            fields = expression.split()
            if len(fields) not in (5, 6):
                self.problem(
                    path,
                    f"cron {text!r} has {len(fields)} fields; write 5 (minute hour day-of-month "
                    "month day-of-week) or 6 (seconds first)",
                )
                continue
            try:
                CronSim(expression, datetime(2000, 1, 1))
            except CronSimError as exc:
                self.problem(path, f"cron {text!r}: {_cron_message(exc, len(fields))}")
                continue
            yield expression

    def intervals(
        self, value: dict[str, str] | list[dict[str, str]] | None
    ) -> Iterator[tuple[int, int]]:
        if value is None:
            return
        many = isinstance(value, list)
        for i, entry in enumerate(value if isinstance(value, list) else [value]):
            path: DocumentPath = ("interval", i) if many else ("interval",)
            every = self.duration((*path, "every"), entry["every"])
            offset = self.duration((*path, "offset"), entry["offset"]) if "offset" in entry else 0
            if every % 1000:
                self.problem((*path, "every"), "an interval is a whole number of seconds")
            elif offset % 1000:
                self.problem((*path, "offset"), "an offset is a whole number of seconds")
            elif offset >= every:
                self.problem(
                    (*path, "offset"),
                    f"offset {entry['offset']} is not shorter than every {entry['every']}",
                )
            else:
                yield every, offset

    def values(
        self, path: DocumentPath, name: str, raw: list[int | str] | None
    ) -> frozenset[int] | None:
        if raw is None:
            return None
        if name == "days_of_week":
            return self.days(path, [str(r) for r in raw])
        low, high = _RANGES[name]
        out: set[int] = set()
        for i, item in enumerate(raw):
            first, last = (item, item) if isinstance(item, int) else map(int, item.split("-"))
            if not low <= first <= last <= high:
                self.problem((*path, i), f"{name} take {low} to {high}; {item!r} is out of range")
                continue
            out.update(range(first, last + 1))
        return frozenset(out)

    def days(self, path: DocumentPath, raw: list[str]) -> frozenset[int]:
        out: set[int] = set()
        for i, item in enumerate(raw):
            first, _, last = item.partition("-")
            a, b = DAY_NAMES.index(first), DAY_NAMES.index(last or first)
            if b < a:
                self.problem(
                    (*path, i), f"day range {item!r} runs backwards; write it Monday first"
                )
                continue
            out.update(range(a, b + 1))
        return frozenset(out)

    def fields(self, path: DocumentPath, entry: dict[str, Any]) -> dict[str, frozenset[int] | None]:
        return {
            name: self.values((*path, name), name, entry.get(name))
            for name in ("seconds", "minutes", "hours", "days_of_month", "months", "days_of_week")
        }

    def calendar(self, path: DocumentPath, entry: dict[str, Any]) -> Calendar:
        before = len(self.problems)
        calendar = Calendar(**self.fields(path, entry))
        if len(self.problems) == before:  # its fields are sound: does any day have them?
            try:
                CronSim(calendar.cron(), datetime(2000, 1, 1))
            except CronSimError:
                self.problem(path, "this calendar entry matches no day (a date no month has)")
        return calendar

    def exclusion(self, path: DocumentPath, entry: dict[str, Any]) -> Exclusion:
        dates = None
        if "dates" in entry:
            dates = set()
            for i, text in enumerate(entry["dates"]):
                text = str(text)
                try:
                    dates.add(date.fromisoformat(text).isoformat())
                except ValueError:
                    self.problem((*path, "dates", i), f"{text!r} is not a date")
        return Exclusion(
            **self.fields(path, entry), dates=None if dates is None else frozenset(dates)
        )


def _cron_message(exc: CronSimError, fields: int) -> str:
    """cronsim's words ("Bad minute"), with the fields' ranges for the one it names."""
    text = str(exc)
    names = "second minute hour day-of-month month day-of-week" if fields == 6 else ""
    hint = {
        "Bad second": "seconds take 0-59",
        "Bad minute": "minutes take 0-59",
        "Bad hour": "hours take 0-23",
        "Bad day-of-month": "days of the month take 1-31 (and L), and must exist in some month",
        "Bad month": "months take 1-12 or jan-dec",
        "Bad day-of-week": "days of the week take 0-7 or sun-sat",
    }.get(text)
    message = text.lower().replace("bad ", "a bad ")
    if names:
        message += " (6 fields: " + names + ")"
    return message + (f": {hint}" if hint else "")
