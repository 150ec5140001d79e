"""Reading conformance cases: YAML or JSON files, each validated against case.schema.json."""

from __future__ import annotations

import fnmatch
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]

from wiggle.conformance._recorder import ServerFault
from wiggle.errors import WiggleError

__all__ = [
    "MISSING",
    "Case",
    "CaseError",
    "Count",
    "Expect",
    "Fault",
    "Moment",
    "Run",
    "Signal",
    "default_spec_dir",
    "load_case",
    "load_cases",
]

#: Marks an expectation the case does not state (a context of `null` is a real expectation).
MISSING: Any = type("Missing", (), {"__repr__": lambda self: "MISSING"})()


class CaseError(WiggleError):
    """A case file that cannot be read or does not match case.schema.json."""


def default_spec_dir() -> Path:
    """spec/conformance of this checkout, or WIGGLE_CONFORMANCE_DIR when set."""
    env = os.environ.get("WIGGLE_CONFORMANCE_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "spec" / "conformance"


@dataclass(frozen=True)
class Moment:
    """When the runner acts: `at_start`, `started:<key>`, or `<TOKEN STATE>:<key>`."""

    kind: str  # "at_start", "started" or a token state name
    key: str = ""

    @staticmethod
    def parse(text: str) -> Moment:
        if text == "at_start":
            return Moment("at_start")
        kind, _, key = text.partition(":")
        return Moment(kind, key)

    @property
    def flow(self) -> str | None:
        """The child flow named by a `flow/node` key, None for a node of the flow under test."""
        return self.key.split("/", 1)[0] if "/" in self.key else None

    @property
    def node(self) -> str:
        return self.key.rsplit("/", 1)[-1]

    def __str__(self) -> str:
        return self.kind if self.kind == "at_start" else f"{self.kind}:{self.key}"


@dataclass(frozen=True)
class Signal:
    name: str
    payload: Any
    when: Moment
    refused: str | None = None  # the server must refuse it, with this in the message


@dataclass(frozen=True)
class Fault:
    action: str  # "kill" | "pause"
    when: Moment
    ms: int


@dataclass(frozen=True)
class Count:
    min: int
    max: int

    @staticmethod
    def parse(value: Any) -> Count:
        if isinstance(value, int):
            return Count(value, value)
        return Count(value["min"], value["max"])

    def __str__(self) -> str:
        return str(self.min) if self.min == self.max else f"{self.min}..{self.max}"


@dataclass(frozen=True)
class Expect:
    status: str | None
    context: Any
    reason: str | None
    steps: dict[str, Count]
    steps_by_mode: dict[str, dict[str, Count]]
    children: dict[str, str]
    min_elapsed_ms: int
    deadline_s: float
    start_error: str | None
    reports: dict[str, list[str]] = field(default_factory=dict)  # mode -> expected reports
    settle_ms: int | None = None  # how long to watch after the end (None: the runner's default)
    #: Watch on after the end until every lease handed out for the run has ended (by a report
    #: or release under it, or by its time running out), not only for settle_ms.
    watch_leases: bool = False
    retry_delays_ms: dict[str, list[int]] = field(default_factory=dict)  # node -> backoffs

    def steps_for(self, mode: str) -> dict[str, Count]:
        return {**self.steps, **self.steps_by_mode.get(mode, {})}

    @staticmethod
    def parse(doc: dict[str, Any]) -> Expect:
        def counts(d: dict[str, Any]) -> dict[str, Count]:
            return {k: Count.parse(v) for k, v in d.items()}

        return Expect(
            status=doc.get("status"),
            context=doc.get("context", MISSING),
            reason=doc.get("reason"),
            steps=counts(doc.get("steps", {})),
            steps_by_mode={m: counts(s) for m, s in doc.get("steps_by_mode", {}).items()},
            children=dict(doc.get("children", {})),
            min_elapsed_ms=int(doc.get("min_elapsed_ms", 0)),
            deadline_s=float(doc.get("deadline_s", 30)),
            start_error=doc.get("start_error"),
            reports={m: list(r) for m, r in doc.get("reports", {}).items()},
            settle_ms=doc.get("settle_ms"),
            watch_leases=bool(doc.get("watch_leases", False)),
            retry_delays_ms={k: list(v) for k, v in doc.get("retry_delays_ms", {}).items()},
        )


@dataclass(frozen=True)
class Run:
    index: int
    description: str
    input: Any
    signals: list[Signal]
    cancel: Moment | None
    cancel_reason: str
    faults: list[Fault]
    expect: Expect
    server_faults: list[ServerFault] = field(default_factory=list)
    transport: str = "plaintext"

    @property
    def alone(self) -> bool:
        """Whether this run needs the worker to itself: faults of either side, or TLS."""
        return bool(self.faults or self.server_faults) or self.transport != "plaintext"


@dataclass(frozen=True)
class Case:
    id: str
    description: str
    flow: dict[str, Any]
    flows: list[dict[str, Any]]
    runs: list[Run]
    path: Path
    #: Whether the case runs in a session's one-at-a-time phase (_runner): a run that needs the
    #: worker to itself, or one that watches a lease out (tens of seconds of waiting, which the
    #: phase of plain cases, one session after another, would make every session wait for).
    has_faults: bool = field(init=False)

    def __post_init__(self) -> None:
        waits = any(r.alone or r.expect.watch_leases for r in self.runs)
        object.__setattr__(self, "has_faults", waits)


def _read(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return json.loads(text)
    from ruamel.yaml import YAML

    # YAML 1.2, safe: `yes`, `on` and friends stay strings, as they do in a JSON reader.
    return YAML(typ="safe", pure=True).load(text)


_validators: dict[Path, jsonschema.Draft202012Validator] = {}


def _schema(spec_dir: Path) -> jsonschema.Draft202012Validator:
    path = (spec_dir / "case.schema.json").resolve()
    if path not in _validators:
        schema = json.loads(path.read_text(encoding="utf-8"))
        _validators[path] = jsonschema.Draft202012Validator(schema)
    return _validators[path]


def load_case(path: Path, spec_dir: Path | None = None) -> Case:
    """Read and validate one case file; CaseError lists every problem."""
    validator = _schema(spec_dir or default_spec_dir())
    try:
        doc = _read(path)
    except Exception as exc:  # YAML and JSON readers raise many types; all mean "unreadable"
        raise CaseError(f"{path}: cannot read: {exc}") from None
    problems = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    if problems:
        lines = [f"{path}: {e.json_path}: {e.message}" for e in problems]
        raise CaseError("\n".join(lines))
    runs = []
    for i, r in enumerate(doc["runs"]):
        cancel = r.get("cancel")
        runs.append(
            Run(
                index=i,
                description=r.get("description", ""),
                input=r.get("input", {}),
                signals=[
                    Signal(s["name"], s.get("payload"), Moment.parse(s["when"]), s.get("refused"))
                    for s in r.get("signals", [])
                ],
                cancel=Moment.parse(cancel["when"]) if cancel else None,
                cancel_reason=(cancel or {}).get("reason", ""),
                faults=[
                    Fault(f["action"], Moment.parse(f["when"]), int(f.get("ms", 0)))
                    for f in r.get("faults", [])
                ],
                expect=Expect.parse(r["expect"]),
                server_faults=[
                    ServerFault(
                        f["rpc"],
                        status=f.get("status", "UNAVAILABLE"),
                        lose_response=bool(f.get("lose_response", False)),
                        times=int(f.get("times", 0)),
                        hold=bool(f.get("hold", False)),
                    )
                    for f in r.get("server_faults", [])
                ],
                transport=r.get("transport", "plaintext"),
            )
        )
    return Case(doc["id"], doc["description"], doc["flow"], doc.get("flows", []), runs, path)


def case_files(spec_dir: Path | None = None) -> list[Path]:
    root = (spec_dir or default_spec_dir()) / "cases"
    return sorted(p for p in root.rglob("*") if p.suffix in (".yaml", ".yml", ".json"))


def load_cases(pattern: str | None = None, spec_dir: Path | None = None) -> list[Case]:
    """Every case under `spec_dir`/cases whose id matches `pattern`, comma-separated globs
    (default: all).

    Ids must be unique, and a flow name may belong to one case only: every case shares one
    server per mode, where an unpinned start or subflow resolves to the newest version of a name.
    """
    spec_dir = spec_dir or default_spec_dir()
    problems: list[str] = []
    cases: list[Case] = []
    for path in case_files(spec_dir):
        try:
            cases.append(load_case(path, spec_dir))
        except CaseError as exc:
            problems.append(str(exc))
    seen: dict[str, Path] = {}
    owner: dict[str, str] = {}
    for case in cases:
        if case.id in seen:
            problems.append(f"{case.path}: id {case.id!r} is also used by {seen[case.id]}")
        seen[case.id] = case.path
        for flow in [case.flow, *case.flows]:
            name = str(flow["name"])
            if owner.setdefault(name, case.id) != case.id:
                problems.append(f"{case.path}: flow {name!r} is also defined by {owner[name]}")
    if problems:
        raise CaseError("\n".join(problems))
    if pattern:
        globs = [g.strip() for g in pattern.split(",") if g.strip()]
        cases = [c for c in cases if any(fnmatch.fnmatchcase(c.id, g) for g in globs)]
    return cases
