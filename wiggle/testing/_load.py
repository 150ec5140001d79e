"""Scenario files: text → a checked `ScenarioFile`, or every problem as FILE:LINE:COL.

The document is read like a flow (the same YAML/JSON loader, so anchors, tags, duplicate keys
and hostile nesting are refused the same way), checked against `scenario.schema.json`, then
against the flow it tests: every activity, signal and node it names must exist there, every
duration must be one, the timeline must not go back in time, and each input must satisfy the
flow's `input` schema. A schedule a scenario names is loaded (its own problems located in its
file), must start the flow under test with an input the flow takes, and every fire a scenario
expects must name one of its times. Nothing runs before all of that holds.
"""

from __future__ import annotations

import difflib
import functools
import json
import os
import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped,unused-ignore]

from wiggle.compiler import (
    MAX_BYTES,
    CompiledFlow,
    SourceMap,
    SubflowRef,
    load_document,
    load_flow_file,
    parse_duration,
    schema_diagnostics,
    subflow_references,
)
from wiggle.compiler import DocumentPath as DocPath
from wiggle.engine import DEFAULT_START_MS, parse_instant_ms
from wiggle.errors import Diagnostic, FlowError
from wiggle.graph import HUMAN_SIGNAL_PREFIX, Await, End, Graph, Join, Predicate, Task
from wiggle.schedules import (
    Schedule,
    fire_input,
    instance_id,
    load_schedule_file,
    nominal_from_instance_id,
    nominal_times,
)

from ._expect import zoned
from ._model import (
    Answer,
    Expect,
    ExpectedFire,
    Moment,
    Scenario,
    ScenarioFile,
    TaskCompletion,
    Where,
)

__all__ = [
    "SCENARIO_SUFFIXES",
    "check_scenarios",
    "fire_time",
    "load_scenario_file",
    "parse_results",
    "scenario_schema",
    "subflow_files",
]

#: How a scenario file is named: beside `flow.yaml`, `flow.scenarios.yaml` (or .yml, .json).
SCENARIO_SUFFIXES = (".scenarios.yaml", ".scenarios.yml", ".scenarios.json")

_ANSWER_KINDS = ("returns", "merge", "fail", "handler")

_DURATION = re.compile(r"[0-9]+(ms|s|m|h|d)")


@functools.cache
def scenario_schema() -> dict[str, Any]:
    """The parsed scenario.schema.json (package data, a copy of spec/schema/)."""
    text = resources.files("wiggle.testing").joinpath("schema", "scenario.schema.json")
    doc: dict[str, Any] = json.loads(text.read_text("utf-8"))
    return doc


@functools.cache
def _validator() -> Any:
    return jsonschema.Draft202012Validator(scenario_schema())


def activities_of(graph: Graph) -> set[str]:
    """Every activity a worker runs for `graph`: tasks, predicates, combines, applies."""
    names: set[str] = set()
    for node in graph:
        if isinstance(node, Task | Predicate | Join):
            names.add(node.activity)
        elif isinstance(node, Await) and node.apply is not None:
            names.add(node.apply.activity)
    return names


def signals_of(graph: Graph) -> list[str]:
    return sorted({n.signal for n in graph if isinstance(n, Await)})


class _Checker:
    """Builds the typed scenarios while collecting every problem, each at its place."""

    def __init__(self, path: Path, source: SourceMap) -> None:
        self.path = path
        self.base = path.parent
        self.source = source
        self.problems: list[Diagnostic] = []
        self.schedules: dict[Path, Schedule | None] = {}  # loaded once per file

    def error(self, where: DocPath, message: str, *, at_key: bool = False) -> None:
        self.problems.append(self.source.diagnostic(where, message, at_key=at_key))

    def where(self, at: DocPath) -> Where:
        line, column = self.source.value(at)
        return (self.source.file, line, column)

    def duration(self, text: str, at: DocPath) -> int:
        try:
            return parse_duration(text)
        except ValueError as exc:
            self.error(at, str(exc))
            return 0

    def instant(self, text: str, at: DocPath) -> int:
        ms = parse_instant_ms(text)
        if ms is None:
            self.error(
                at, f"{text!r} is not an RFC 3339 instant with an offset (2026-01-05T09:00Z)"
            )
            return DEFAULT_START_MS
        return ms

    def time(self, text: str, at: DocPath, start_ms: int) -> int:
        """An `at`: a duration since the start, or an instant (ms since the start)."""
        if _DURATION.fullmatch(text):
            return self.duration(text, at)
        ms = parse_instant_ms(text)
        if ms is None:
            self.error(
                at,
                f"{text!r} is neither a duration (250ms, 30s, 5m, 2h, 1d) nor an RFC 3339 "
                "instant with an offset (2026-10-25T02:30:00+02:00)",
            )
            return 0
        if ms < start_ms:
            self.error(at, f"{text} is before the scenario's start ({_instant_text(start_ms)})")
            return 0
        return ms - start_ms

    def relative(self, text: str) -> Path:
        return (self.base / text).resolve() if not os.path.isabs(text) else Path(text)


def _instant_text(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat().replace("+00:00", "Z")


def fire_time(text: str, schedule: Schedule) -> int | None:
    """The nominal time an expected fire names: an RFC 3339 instant with an offset, or an
    instance id of `schedule` (`<name>-YYYYMMDDTHHMMSSZ`); None when it is neither."""
    ms = parse_instant_ms(text)
    if ms is None:
        ms = nominal_from_instance_id(schedule.name, text)
    return ms


def _duration_text(ms: int) -> str:
    """`ms` in the largest unit that divides it: 7200000 -> 2h."""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def _near(name: str, known: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _compile(checker: _Checker, text: str, at: DocPath) -> CompiledFlow | None:
    path = checker.relative(text)
    if not path.is_file():
        checker.error(at, f"flow file {text} does not exist (looked in {checker.base})")
        return None
    return load_flow_file(path)  # its own problems are the flow file's, FILE:LINE:COL there


def _flows(checker: _Checker, doc: Mapping[str, Any]) -> list[CompiledFlow]:
    """The other flows (listed, then subflow targets found beside the flow), then the flow."""
    main = _compile(checker, doc["flow"], ("flow",))
    if main is None:
        return []
    flows: dict[str, CompiledFlow] = {}
    for i, text in enumerate(doc.get("flows") or []):
        other = _compile(checker, text, ("flows", i))
        if other is not None:
            flows[other.name] = other
    files, missing = subflow_files(checker.relative(doc["flow"]), {*flows, main.name})
    for ref in missing:
        checker.error(
            ("flow",),
            f"{ref.where()}: subflow {ref.flow!r} is not in `flows:` and there is no "
            f"{ref.flow}.yaml beside the flow; list the file under `flows:`",
        )
    for file in files:
        found = load_flow_file(file)
        flows[found.name] = found
    return [*flows.values(), main]


def subflow_files(
    flow_file: Path, known: Collection[str] = ()
) -> tuple[list[Path], list[SubflowRef]]:
    """The flow files `flow_file` starts through `subflow` steps, transitively, each found
    beside the file naming it as `<name>.yaml` (flows named in `known` are not looked for),
    and the references for which there is no such file."""
    names = set(known)
    found: list[Path] = []
    missing: list[SubflowRef] = []
    todo = [flow_file]
    while todo:
        for ref in subflow_references(todo.pop()):
            if ref.flow in names:
                continue
            names.add(ref.flow)
            beside = Path(ref.file).parent / f"{ref.flow}.yaml"
            if beside.is_file():
                found.append(beside)
                todo.append(beside)
            else:
                missing.append(ref)
    return found, missing


def _handlers(checker: _Checker, text: str, *, load: bool = True) -> str | None:
    from wiggle.worker import load_handlers

    spec = text
    if text.endswith(".py") or "/" in text or os.sep in text:
        spec = str(checker.relative(text))
    if not load:
        # An editor checks the file as it is typed: it looks for the handlers, never runs them.
        if spec != text and not os.path.isfile(spec):
            checker.error(("handlers",), f"cannot load handlers {text}: no such file {spec}")
            return None
        return spec
    try:
        load_handlers(spec)
    except ImportError as exc:
        checker.error(("handlers",), f"cannot load handlers {text}: {exc}")
        return None
    except Exception as exc:
        checker.error(
            ("handlers",), f"importing handlers {text} raised {type(exc).__name__}: {exc}"
        )
        return None
    return spec


class _Context:
    """What the scenarios may name: the flow's nodes, signals and every flow's activities."""

    def __init__(self, flows: Sequence[CompiledFlow], handlers: str | None) -> None:
        self.graph = flows[-1].graph
        self.flow = flows[-1]
        self.activities = sorted(set().union(*(activities_of(f.graph) for f in flows)))
        self.signals = signals_of(self.graph)
        self.handlers = handlers


def _answers(
    checker: _Checker, ctx: _Context, doc: Mapping[str, Any], at: DocPath
) -> dict[str, Sequence[Answer] | Answer]:
    out: dict[str, Sequence[Answer] | Answer] = {}
    for name, spec in doc.items():
        if name not in ctx.activities:
            checker.error(
                (*at, name),
                f"flow {ctx.flow.name!r} has no activity {name!r}{_near(name, ctx.activities)}",
                at_key=True,
            )
            continue
        if isinstance(spec, list):
            out[name] = [_answer(checker, ctx, v, (*at, name, i)) for i, v in enumerate(spec)]
        else:
            out[name] = _answer(checker, ctx, spec, (*at, name))
    return out


def _answer(checker: _Checker, ctx: _Context, spec: Any, at: DocPath) -> Answer:
    if not isinstance(spec, dict):
        return Answer.value(spec)
    kinds = [k for k in _ANSWER_KINDS if k in spec]
    if len(kinds) != 1:
        found = f"found {', '.join(kinds)}" if kinds else "found none"
        checker.error(at, f"a result needs exactly one of returns, merge, fail, handler; {found}")
        return Answer()
    extra = [k for k in ("non_retryable", "error_type") if k in spec and "fail" not in spec]
    for key in extra:
        checker.error((*at, key), f"{key!r} goes with 'fail' only", at_key=True)
    if "handler" in spec and ctx.handlers is None:
        checker.error((*at, "handler"), "'handler: true' needs a `handlers:` file", at_key=True)
    if "returns" in spec:
        return Answer.value(spec["returns"])
    if "merge" in spec:
        return Answer(merge=spec["merge"])
    if "fail" in spec:
        return Answer(
            fail=spec["fail"],
            non_retryable=bool(spec.get("non_retryable", False)),
            error_type=spec.get("error_type", ""),
        )
    return Answer(handler=True)


def _node(checker: _Checker, ctx: _Context, node_id: str, at: DocPath) -> None:
    node = ctx.graph.nodes.get(node_id)
    if node is None:
        runs = sorted(n.id for n in ctx.graph if getattr(n, "activity", None) == node_id)
        near = (
            f" (activity {node_id!r} runs at node {', '.join(map(repr, runs))})"
            if runs
            else _near(node_id, sorted(ctx.graph.nodes))
        )
        checker.error(at, f"flow {ctx.flow.name!r} has no node {node_id!r}{near}")
    elif isinstance(node, End):
        checker.error(at, "the path never lists `end`; expect `status: COMPLETED` instead")


def _expected_fire(
    checker: _Checker, schedule: Schedule, item: Any, at: DocPath
) -> ExpectedFire | None:
    """One entry of `fired` (a time) or `skipped` (a time, or {at: TIME, reason: TEXT})."""
    reason = None
    if isinstance(item, dict):
        reason = item.get("reason")
        item, at = item["at"], (*at, "at")
    ms = fire_time(item, schedule)
    if ms is None:
        checker.error(
            at,
            f"{item!r} is neither an RFC 3339 instant with an offset (2026-10-25T02:30:00+02:00) "
            f"nor an instance id of schedule {schedule.name!r} ({schedule.name}-YYYYMMDDTHHMMSSZ)",
        )
        return None
    if next(iter(nominal_times(schedule.spec, ms - 1, until_ms=ms)), None) != ms:
        after = next(iter(nominal_times(schedule.spec, ms)), None)
        following = "" if after is None else f"; the next one after it is {zoned(schedule, after)}"
        local = zoned(schedule, ms)
        shown = item if local == item else f"{item} ({local})"
        checker.error(at, f"{shown} is not a time schedule {schedule.name!r} fires at{following}")
        return None
    return ExpectedFire(ms, reason, item)


def _fires(
    checker: _Checker, schedule: Schedule | None, doc: Mapping[str, Any], at: DocPath, named: bool
) -> dict[str, list[ExpectedFire] | None]:
    out: dict[str, list[ExpectedFire] | None] = {"fired": None, "skipped": None}
    for key in out:
        if key not in doc:
            continue
        if schedule is None:
            if named:
                continue  # the schedule file's own problems are reported
            checker.error(
                (*at, key),
                f"'{key}' is about a schedule's fires: name the schedule file under `schedule:`",
                at_key=True,
            )
            continue
        found = [
            _expected_fire(checker, schedule, v, (*at, key, i)) for i, v in enumerate(doc[key])
        ]
        out[key] = [f for f in found if f is not None]
    return out


def _expect(
    checker: _Checker,
    ctx: _Context,
    doc: Mapping[str, Any],
    at: DocPath,
    schedule: Schedule | None = None,
    named: bool = False,
) -> Expect:
    fires = _fires(checker, schedule, doc, at, named)
    for key in ("path", "visits", "skips", "waiting_at"):
        for i, node_id in enumerate(doc.get(key, ())):
            _node(checker, ctx, node_id, (*at, key, i))
    for name in doc.get("calls", {}):
        if name not in ctx.activities:
            checker.error(
                (*at, "calls", name),
                f"flow {ctx.flow.name!r} has no activity {name!r}{_near(name, ctx.activities)}",
                at_key=True,
            )
    for i, event in enumerate(doc.get("events", [])):
        if "node" in event:
            _node(checker, ctx, event["node"], (*at, "events", i, "node"))
    return Expect(
        status=doc.get("status"),
        reason=doc.get("reason"),
        context=doc.get("context"),
        has_context="context" in doc,
        context_at=dict(doc.get("context_at", {})),
        path=doc.get("path"),
        visits=tuple(doc.get("visits", ())),
        skips=tuple(doc.get("skips", ())),
        waiting_at=doc.get("waiting_at"),
        calls=dict(doc.get("calls", {})),
        events=tuple(doc.get("events", ())),
        fired=fires["fired"],
        skipped=fires["skipped"],
        where=checker.where(at),
    )


def _timeline(
    checker: _Checker,
    ctx: _Context,
    entries: Sequence[Mapping[str, Any]],
    at: DocPath,
    start_ms: int,
    schedule: Schedule | None,
    named: bool,
) -> list[Moment]:
    moments: list[Moment] = []
    reached = 0  # virtual ms since the start the timeline has got to
    for i, entry in enumerate(entries):
        here = (*at, i)
        acts = [
            k for k in ("advance", "outage", "signal", "cancel", "complete", "expect") if k in entry
        ]
        if len(acts) > 1:
            checker.error(here, f"a timeline entry does one thing; found {', '.join(acts)}")
        if "payload" in entry and "signal" not in entry:
            checker.error((*here, "payload"), "'payload' goes with 'signal'", at_key=True)
        if "at" in entry and "advance" in entry:
            checker.error((*here, "at"), "give 'at' or 'advance', not both", at_key=True)
        if named:
            for key in ("signal", "cancel", "complete"):
                if key in entry:
                    checker.error(
                        (*here, key),
                        f"a scenario with a schedule has no instance of its own to {key}: "
                        "its instances are the schedule's",
                        at_key=True,
                    )
        at_ms = None
        if "at" in entry:
            at_ms = checker.time(entry["at"], (*here, "at"), start_ms)
            if at_ms < reached:
                when = f"{_duration_text(reached)} after the start"
                if not _DURATION.fullmatch(entry["at"]):
                    when = f"{_instant_text(start_ms + reached)}, {when}"
                checker.error(
                    (*here, "at"),
                    f"at {entry['at']} is before the time the timeline already reached ({when})",
                )
            reached = max(reached, at_ms)
        advance_ms = None
        if "advance" in entry:
            advance_ms = checker.duration(entry["advance"], (*here, "advance"))
            reached += advance_ms
        outage_ms = None
        if "outage" in entry:
            outage_ms = checker.duration(entry["outage"], (*here, "outage"))
            reached += outage_ms
        signal = entry.get("signal")
        if signal is not None and signal not in ctx.signals:
            awaited = ", ".join(ctx.signals) or "none"
            checker.error(
                (*here, "signal"),
                f"flow {ctx.flow.name!r} never awaits signal {signal!r} (it awaits: {awaited})",
            )
        complete = None
        if isinstance(entry.get("complete"), Mapping):
            doc = entry["complete"]
            task = str(doc.get("task", ""))
            if HUMAN_SIGNAL_PREFIX + task not in ctx.signals:
                checker.error(
                    (*here, "complete", "task"),
                    f"flow {ctx.flow.name!r} has no human step {task!r}",
                )
            complete = TaskCompletion(
                task, str(doc.get("as", "")), tuple(doc.get("groups", ())), doc.get("answer")
            )
        expect = (
            _expect(checker, ctx, entry["expect"], (*here, "expect"), schedule, named)
            if "expect" in entry
            else None
        )
        moments.append(
            Moment(
                at_ms=at_ms,
                advance_ms=advance_ms,
                outage_ms=outage_ms,
                signal=signal,
                payload=entry.get("payload"),
                cancel=entry.get("cancel"),
                complete=complete,
                expect=expect,
                where=checker.where(here),
            )
        )
    return moments


def _input(checker: _Checker, ctx: _Context, doc: Mapping[str, Any], at: DocPath) -> Any:
    if "input" in doc and "input_file" in doc:
        checker.error((*at, "input_file"), "give 'input' or 'input_file', not both", at_key=True)
    value = doc.get("input")
    if "input_file" in doc:
        file = checker.relative(doc["input_file"])
        try:
            value = json.loads(file.read_bytes())
        except OSError as exc:
            checker.error((*at, "input_file"), f"cannot read {doc['input_file']}: {exc.strerror}")
            return None
        except ValueError as exc:
            checker.error((*at, "input_file"), f"{doc['input_file']} is not JSON: {exc}")
            return None
    schema = ctx.graph.input_schema
    if schema is not None:
        error = jsonschema.validators.validator_for(schema)(schema).iter_errors(value)
        first = next(iter(sorted(error, key=lambda e: list(e.absolute_path))), None)
        if first is not None:
            where = (*at, "input", *first.absolute_path) if "input" in doc else (*at, "input_file")
            checker.error(where, f"input does not satisfy flow {ctx.flow.name!r}: {first.message}")
    return value


def _schedule(
    checker: _Checker, ctx: _Context, text: str, at: DocPath, start_ms: int
) -> Schedule | None:
    """The schedule file `text` names, checked against the flow under test: it must start that
    flow (the version here, when it pins one) with an input the flow takes. Loaded once per
    file; its own problems are located in it."""
    path = checker.relative(text)
    if path in checker.schedules:
        return checker.schedules[path]
    if not path.is_file():
        checker.error(at, f"schedule file {text} does not exist (looked in {checker.base})")
        return None
    try:
        schedule: Schedule | None = load_schedule_file(path)
    except FlowError as exc:
        checker.problems += exc.diagnostics
        schedule = None
    if schedule is not None:
        problem = _schedule_problem(schedule, ctx, start_ms)
        if problem:
            checker.error(at, f"schedule {schedule.name!r} ({text}) {problem}")
            schedule = None
    checker.schedules[path] = schedule
    return schedule


def _schedule_problem(schedule: Schedule, ctx: _Context, start_ms: int) -> str | None:
    if schedule.flow != ctx.flow.name:
        return f"starts flow {schedule.flow!r}, not {ctx.flow.name!r}, the flow under test"
    if schedule.version is not None and schedule.version != ctx.flow.version:
        return (
            f"pins version {schedule.version}, not the version of {ctx.flow.name!r} here "
            f"({ctx.flow.version})"
        )
    nominal = next(iter(nominal_times(schedule.spec, start_ms)), start_ms)
    try:
        value = fire_input(schedule, instance_id(schedule.name, nominal), nominal, nominal)
    except Exception as exc:  # an input_values expression failing on its first fire
        return f"cannot build its first fire's input: input_values: {exc}"
    schema = ctx.graph.input_schema
    if schema is not None:
        errors = jsonschema.validators.validator_for(schema)(schema).iter_errors(value)
        first = next(iter(sorted(errors, key=lambda e: list(e.absolute_path))), None)
        if first is not None:
            return f"starts it with an input it refuses: {first.message}"
    return None


def _scenarios(checker: _Checker, ctx: _Context, doc: Mapping[str, Any]) -> Iterator[Scenario]:
    shared = _answers(checker, ctx, doc.get("activities", {}), ("activities",))
    file_start = (
        checker.instant(doc["start_time"], ("start_time",)) if "start_time" in doc else None
    )
    file_schedule = None
    if "schedule" in doc:
        first = file_start if file_start is not None else DEFAULT_START_MS
        file_schedule = _schedule(checker, ctx, doc["schedule"], ("schedule",), first)
    names: dict[str, int] = {}
    for i, spec in enumerate(doc["scenarios"]):
        at: DocPath = ("scenarios", i)
        name = spec["name"]
        if name in names:
            line = checker.where(("scenarios", names[name], "name"))[1]
            checker.error((*at, "name"), f"scenario {name!r} is already defined on line {line}")
        names.setdefault(name, i)
        start = file_start if file_start is not None else DEFAULT_START_MS
        if "start_time" in spec:
            start = checker.instant(spec["start_time"], (*at, "start_time"))
        own = _answers(checker, ctx, spec.get("activities", {}), (*at, "activities"))
        schedule = file_schedule
        if "schedule" in spec:
            schedule = _schedule(checker, ctx, spec["schedule"], (*at, "schedule"), start)
        named = "schedule" in spec or "schedule" in doc
        if named:
            for key in ("input", "input_file"):
                if key in spec:
                    checker.error(
                        (*at, key),
                        "a scenario with a schedule starts no instance of its own: the "
                        "schedule's fires start them, with the schedule's input",
                        at_key=True,
                    )
            if "started_by" in spec:
                checker.error(
                    (*at, "started_by"),
                    "a scenario with a schedule starts no instance of its own: the schedule's "
                    "fires start them, and no person is their starter",
                    at_key=True,
                )
        timeline = spec.get("timeline", [])
        yield Scenario(
            name=name,
            input=None if named else _input(checker, ctx, spec, at),
            answers={**shared, **own},
            timeline=_timeline(checker, ctx, timeline, (*at, "timeline"), start, schedule, named),
            expect=_expect(checker, ctx, spec["expect"], (*at, "expect"), schedule, named)
            if "expect" in spec
            else None,
            run_to_end=spec.get("run_to_end", True),
            start_ms=start,
            description=spec.get("description", ""),
            where=checker.where(at),
            schedule=schedule,
            started_by=None if named else spec.get("started_by"),
        )


def load_scenario_file(path: str | os.PathLike[str]) -> ScenarioFile:
    """Read and check a scenario file. Raises FlowError with every problem (the flow's own
    problems, if it has any, located in the flow file)."""
    name = os.fspath(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise FlowError([Diagnostic(name, 0, 0, f"cannot read: {exc.strerror}")]) from None
    return check_scenarios(raw[: MAX_BYTES + 1], path)


def check_scenarios(
    source: str | bytes, path: str | os.PathLike[str], *, load_handlers: bool = True
) -> ScenarioFile:
    """Check the text of the scenario file at `path` (its flows and schedules read from disk
    beside it); FlowError as `load_scenario_file`. `load_handlers=False` only looks for the
    handlers file instead of importing it (an editor checking the text as it is typed)."""
    file = Path(path)
    name = os.fspath(path)
    loaded = load_document(source, name)
    checker = _Checker(file.resolve(), loaded.source)
    problems = schema_diagnostics(_validator(), loaded.value, loaded.source)
    if problems:
        raise FlowError(problems)
    doc: dict[str, Any] = loaded.value
    flows = _flows(checker, doc)
    handlers = (
        _handlers(checker, doc["handlers"], load=load_handlers) if "handlers" in doc else None
    )
    if not flows:
        raise FlowError(checker.problems)
    ctx = _Context(flows, handlers)
    scenarios = list(_scenarios(checker, ctx, doc))
    if checker.problems:
        raise FlowError(sorted(checker.problems))
    return ScenarioFile(
        path=file,
        flows=flows,
        flow_file=checker.relative(doc["flow"]),
        handlers=handlers,
        scenarios=scenarios,
    )


def parse_results(
    results: Mapping[str, Any], flows: Sequence[CompiledFlow], *, handlers: bool = True
) -> dict[str, Sequence[Answer] | Answer]:
    """Activity results given in code (`FlowTest(results=...)`), in a scenario file's form;
    FlowError names every problem."""
    source = SourceMap("<results>")
    schema = {**scenario_schema(), "$ref": "#/$defs/activities"}
    schema.pop("required", None)
    schema.pop("properties", None)
    schema.pop("additionalProperties", None)
    validator = jsonschema.Draft202012Validator(schema)
    problems = schema_diagnostics(validator, dict(results), source)
    if problems:
        raise FlowError(problems)
    checker = _Checker(Path.cwd() / "<results>", source)
    answers = _answers(checker, _Context(flows, "" if handlers else None), results, ())
    if checker.problems:
        raise FlowError(checker.problems)
    return answers
