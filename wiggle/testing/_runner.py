"""Running scenario files: every scenario under every mode, the modes compared, coverage kept.

One `Harness` (a virtual clock, one in-memory engine per mode) serves the whole run; each
scenario sets the clock to its start time and cancels its instance if it is still running at
the end (a scenario with a schedule deletes it and clears the instances away), so scenarios
never see each other. A scenario passes in a mode when every expectation holds there and the
mode ended it as the first mode did (status, reason, context, path, calls: the EXACT rule of
`wiggle.modes`; under a schedule, of its last instance, and the same fires).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wiggle.errors import FlowError, WiggleError
from wiggle.jsonvalue import show
from wiggle.modes import EXACT, Ending, differences
from wiggle.schedules import SCHEDULE_SUFFIXES
from wiggle.worker import Registry, load_handlers

from ._coverage import Coverage
from ._expect import show_path
from ._flowtest import MODES, FlowTest, Harness, ScenarioError
from ._load import SCENARIO_SUFFIXES, load_scenario_file
from ._model import Scenario, ScenarioFile

__all__ = ["ModeRun", "RunReport", "find_scenario_files", "run_files", "run_scenario"]


@dataclass
class ModeRun:
    """One scenario under one mode."""

    file: str
    scenario: str
    mode: str
    line: int = 0
    problems: list[str] = field(default_factory=list)
    status: str = ""
    reason: str = ""
    context: Any = None
    path: list[str] = field(default_factory=list)
    calls: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    #: Under a schedule: every nominal time it decided, as `<time> started <id>` or
    #: `<time> skipped: <reason>`; the instance the status, context and path are of (its last).
    fires: list[str] = field(default_factory=list)
    instance: str = ""

    @property
    def passed(self) -> bool:
        return not self.problems

    @property
    def nodeid(self) -> str:
        return f"{self.file}::{self.scenario}[{self.mode}]"

    def document(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "scenario": self.scenario,
            "mode": self.mode,
            "outcome": "passed" if self.passed else "failed",
            "problems": self.problems,
            "status": self.status,
            "reason": self.reason,
            "context": self.context,
            "path": self.path,
            "calls": self.calls,
            "fires": self.fires,
            "seconds": round(self.seconds, 4),
        }


@dataclass
class RunReport:
    runs: list[ModeRun] = field(default_factory=list)
    errors: list[FlowError] = field(default_factory=list)  # files that could not be loaded
    coverage: Coverage = field(default_factory=Coverage)
    seconds: float = 0.0

    @property
    def passed(self) -> int:
        return sum(r.passed for r in self.runs)

    @property
    def failed(self) -> int:
        return sum(not r.passed for r in self.runs)


def find_scenario_files(targets: Sequence[str]) -> tuple[list[Path], list[str]]:
    """Scenario files named by `targets`: a scenario file, a flow (its `NAME.scenarios.yaml`
    beside it or in a `scenarios/` folder beside it), a schedule (its
    `NAME.schedule.scenarios.yaml` there, or in the `scenarios/` folder beside its own folder),
    or a directory (every scenario file under it). Returns (files, problems)."""
    files: list[Path] = []
    problems: list[str] = []
    for target in targets:
        path = Path(target)
        if path.is_dir():
            found = sorted(
                p
                for suffix in SCENARIO_SUFFIXES
                for p in path.rglob(f"*{suffix}")
                if not any(part.startswith(".") for part in p.relative_to(path).parts)
            )
            if not found:
                problems.append(f"{target}: no scenario files (*.scenarios.yaml) under it")
            files.extend(found)
        elif path.name.endswith(SCENARIO_SUFFIXES):
            if path.is_file():
                files.append(path)
            else:
                problems.append(f"{target}: no such file")
        elif path.is_file():
            stem = path.name.rsplit(".", 1)[0]
            folders = [path.parent, path.parent / "scenarios"]
            if path.name.endswith(SCHEDULE_SUFFIXES):  # schedules/NAME.schedule.yaml
                folders.append(path.parent.parent / "scenarios")
            beside = [
                folder / (stem + suffix) for folder in folders for suffix in SCENARIO_SUFFIXES
            ]
            found_one = next((p for p in beside if p.is_file()), None)
            if found_one is None:
                problems.append(
                    f"{target}: no scenario file for it (expected {beside[0].name} beside it "
                    "or in a scenarios/ folder beside it)"
                )
            else:
                files.append(found_one)
        else:
            problems.append(f"{target}: no such file or directory")
    unique = list(dict.fromkeys(files))
    return unique, problems


def _shown(path: Path) -> str:
    """`path` from the working directory when it is below it, else as it is."""
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive
        return str(path)
    return str(path) if relative.startswith("..") else relative


def run_scenario(
    harness: Harness,
    sf: ScenarioFile,
    scenario: Scenario,
    mode: str,
    registry: Registry | None,
    coverage: Coverage | None = None,
) -> ModeRun:
    """Run one scenario under one mode on `harness`."""
    result = ModeRun(_shown(sf.path), scenario.name, mode, line=scenario.where[1])
    began = time.perf_counter()
    run = FlowTest(
        sf.flow,
        flows=sf.flows[:-1],
        handlers=registry,
        mode=mode,
        start_time=scenario.start_ms,
        harness=harness,
        answers=scenario.answers,
    )
    try:
        if scenario.schedule is not None:
            run.apply_schedule(scenario.schedule)
        else:
            # The same instance id in every mode: handlers that build keys from it agree.
            run.start(
                scenario.input,
                instance_id=harness.instance_id(scenario.name, mode),
                person=scenario.started_by,
            )
        for moment in scenario.timeline:
            if moment.at_ms is not None:
                run.advance_to(moment.at_ms)
            if moment.advance_ms is not None:
                run.advance(moment.advance_ms)
            if moment.outage_ms is not None:
                run.outage(moment.outage_ms)
            if moment.signal is not None:
                run.signal(moment.signal, moment.payload)
            if moment.cancel is not None:
                run.cancel(moment.cancel)
            if moment.complete is not None:
                done = moment.complete
                run.complete_task(done.task, done.answer, person=done.person, groups=done.groups)
            if moment.expect is not None:
                result.problems += [
                    f"at line {moment.where[1]} of the timeline: {p}"
                    for p in run.problems(moment.expect)
                ]
        if scenario.run_to_end:
            run.run_to_end()
        _ended(run, result)
        if scenario.expect is not None:
            result.problems += run.problems(scenario.expect)
        if coverage is not None:
            for graph, trace in run.traces():
                coverage.add(graph.name, trace)
    except (WiggleError, ScenarioError) as exc:
        result.problems.append(f"the scenario could not go on: {exc}")
    finally:
        run.close()
        result.seconds = time.perf_counter() - began
    return result


def _ended(run: FlowTest, result: ModeRun) -> None:
    """How the run ended: its instance's status, reason, context and path and the calls; under
    a schedule, its fires and the last instance it started."""
    if run.schedule is not None:
        fires = run.fires()
        result.fires = [f.describe(run.schedule) for f in fires]
        started = [f.instance_id for f in fires if f.instance_id is not None]
        result.calls = dict(run.calls)
        if not started:
            return
        result.instance = started[-1]
    seen = run.observed(result.instance or None)
    result.status, result.reason, result.context = seen.status, seen.reason, seen.context
    result.path, result.calls = list(seen.path), dict(seen.calls)


def _ending(run: ModeRun) -> Ending:
    return Ending(run.mode, run.status, run.context, run.reason, run.calls, path=run.path)


def _compare(reference: ModeRun, other: ModeRun) -> list[str]:
    """How `other` ended differently from `reference` (each a mode of one scenario), by the
    EXACT rule of wiggle.modes: on a virtual clock nothing races, so everything must match."""
    found = {d.aspect for d in differences([_ending(reference), _ending(other)], EXACT)}
    out = []
    first = reference.mode
    if found & {"status", "reason"}:
        out.append(
            f"mode difference: {first} ended {reference.status} ({reference.reason!r}), "
            f"{other.mode} {other.status} ({other.reason!r})"
        )
    if "context" in found:
        out.append(
            f"mode difference: the contexts differ\n  {first}: {show(reference.context)}\n"
            f"  {other.mode}: {show(other.context)}"
        )
    if "path" in found:
        out.append(
            f"mode difference: the paths differ\n  {first}: {show_path(reference.path)}\n"
            f"  {other.mode}: {show_path(other.path)}"
        )
    if "steps" in found:
        out.append(
            f"mode difference: the calls differ\n  {first}: {show(reference.calls)}\n"
            f"  {other.mode}: {show(other.calls)}"
        )
    if reference.fires != other.fires:
        out.append(
            f"mode difference: the schedule's fires differ\n"
            f"  {first}: {'; '.join(reference.fires)}\n  {other.mode}: {'; '.join(other.fires)}"
        )
    return out


def _registry(sf: ScenarioFile) -> Registry | None:
    return load_handlers(sf.handlers) if sf.handlers else None


def run_files(
    files: Iterable[Path],
    *,
    modes: Sequence[str] = MODES,
    select: str = "",
    on_run: Callable[[ModeRun], None] | None = None,
    on_error: Callable[[FlowError], None] | None = None,
    coverage: bool = False,
) -> RunReport:
    """Load and run every scenario of `files` (those whose name contains `select`) under
    `modes`. `on_run` hears of each result as it comes, `on_error` of each file that did not
    load."""
    report = RunReport()
    began = time.perf_counter()
    harness = Harness()
    try:
        for file in files:
            try:
                sf = load_scenario_file(file)
            except FlowError as exc:
                report.errors.append(exc)
                if on_error is not None:
                    on_error(exc)
                continue
            registry = _registry(sf)
            if coverage:
                for flow in sf.flows:
                    owner = _shown(sf.flow_file) if flow is sf.flow else ""
                    report.coverage.flow(flow.graph, owner)
            for scenario in sf.scenarios:
                if select and select not in scenario.name:
                    continue
                runs = [
                    run_scenario(
                        harness,
                        sf,
                        scenario,
                        mode,
                        registry,
                        report.coverage if coverage else None,
                    )
                    for mode in modes
                ]
                for other in runs[1:]:
                    other.problems += _compare(runs[0], other)
                for run in runs:
                    report.runs.append(run)
                    if on_run is not None:
                        on_run(run)
    finally:
        harness.close()
    report.seconds = time.perf_counter() - began
    return report
