"""The audit of schedule fires (docs/schedules.md, "Firing"), from the engine's tables.

For every schedule: the nominal times its timetable names after its creation up to its cursor
(computed here by wiggle.schedules.nominal_times from the document it stores) against the rows of
`wiggle_schedule_fires` (a STARTED or BUFFERED row decides one time; a SKIPPED row a run of
`count` times up to `until_ms`), and the STARTED rows against `wiggle_instances`. The contract:
each of those times decided by exactly one row, none missing, none decided that the timetable
does not name; each STARTED row's instance `<schedule>-<nominal time>` there, once; no instance
named after a schedule's nominal time without its STARTED row; the schedule's `fired` and
`skipped` counts equal to its rows. Beside it, the few reads the schedule scenarios aim their
faults by (`db_now`, `fired_at`, `pending`) and their ledger line (`tally`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from faultkit import Checker, Cluster, Tally

from wiggle.schedules import instance_id, load_schedule, nominal_from_instance_id, nominal_times


@dataclass
class Timeline:
    """One schedule as the audit found it."""

    name: str
    created_ms: int
    cursor_ms: int
    next_due_ms: int | None
    timetable: list[int]  # the nominal times in (created, cursor]
    started: list[int] = field(default_factory=list)  # nominal times with a STARTED row
    skipped: dict[int, str] = field(default_factory=dict)  # nominal time -> reason
    buffered: list[int] = field(default_factory=list)


@dataclass
class FireAudit:
    schedules: int = 0
    timetable: int = 0  # nominal times the timetables name, from creation to cursor
    started: int = 0
    skipped: int = 0
    buffered: int = 0
    missing: int = 0  # named by a timetable, decided by no row
    doubled: int = 0  # decided by more than one row
    stray: int = 0  # decided by a row, named by no timetable (or past the cursor)
    wrong_id: int = 0  # a STARTED row whose instance is not `<schedule>-<nominal time>`
    absent: int = 0  # a STARTED row whose instance is not in wiggle_instances
    orphans: int = 0  # an instance named after a nominal time without its STARTED row
    counters: int = 0  # schedules whose fired or skipped count disagrees with their rows
    worst_late_ms: int = 0  # the longest a STARTED row was decided after its due time
    ids: list[str] = field(default_factory=list)  # the instances the STARTED rows name
    reasons: Counter[str] = field(default_factory=Counter)  # skip reason -> nominal times
    timelines: dict[str, Timeline] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # the first few, for the message

    @property
    def clean(self) -> bool:
        return not (
            self.missing
            or self.doubled
            or self.stray
            or self.wrong_id
            or self.absent
            or self.orphans
            or self.counters
        )

    def line(self) -> str:
        return (
            f"{self.schedules} schedules, {self.timetable} nominal times: {self.started} started, "
            f"{self.skipped} skipped, {self.buffered} buffered; missing {self.missing}, "
            f"doubled {self.doubled}, stray {self.stray}, wrong id {self.wrong_id}, "
            f"instance absent {self.absent}, orphan instances {self.orphans}, "
            f"counts off {self.counters}; latest fire {self.worst_late_ms / 1000:.1f} s late"
        )

    def _problem(self, text: str) -> None:
        if len(self.problems) < 10:
            self.problems.append(text)


def scalar(checker: Checker, sql: str, **params: int) -> int:
    with checker.sa.connect() as conn:
        return int(conn.execute(sa.text(sql), params).scalar_one())


def db_now(checker: Checker) -> int:
    """The database's clock (ms): the servers' clock, unless one was given another."""
    return scalar(checker, "SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)")


def fired_at(checker: Checker, nominal_ms: int) -> int:
    """How many schedules have decided `nominal_ms` (committed)."""
    return scalar(
        checker, "SELECT count(*) FROM wiggle_schedule_fires WHERE nominal_ms = :n", n=nominal_ms
    )


def pending(checker: Checker) -> int:
    """How many schedules have a fire to come."""
    return scalar(checker, "SELECT count(*) FROM wiggle_schedules WHERE next_due_ms IS NOT NULL")


def audit(engine: sa.Engine, names: Iterable[str] | None = None) -> FireAudit:
    """Audit the schedules `names` (every schedule when None) as the tables hold them now, in
    one snapshot: servers may go on firing meanwhile."""
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":  # one snapshot of all three tables
            conn = conn.execution_options(isolation_level="REPEATABLE READ")
        schedules = conn.execute(
            sa.text(
                "SELECT name, document, cursor_ms, next_due_ms, created_at_ms, fired, skipped "
                "FROM wiggle_schedules"
            )
        ).all()
        fires = conn.execute(
            sa.text(
                "SELECT schedule, nominal_ms, until_ms, count, due_ms, outcome, reason, "
                "instance_id, triggered, decided_at_ms FROM wiggle_schedule_fires"
            )
        ).all()
        instances = set(conn.execute(sa.text("SELECT id FROM wiggle_instances")).scalars())
    wanted = set(names) if names is not None else {row.name for row in schedules}
    out = FireAudit()
    by_name: dict[str, list[Any]] = {}
    for fire in fires:
        by_name.setdefault(fire.schedule, []).append(fire)
    started_ids: set[str] = set()
    for row in sorted(schedules, key=lambda r: r.name):
        if row.name not in wanted:
            continue
        spec = load_schedule(row.document, f"<{row.name}>").spec
        created, cursor = int(row.created_at_ms), int(row.cursor_ms)
        line = Timeline(
            row.name,
            created,
            cursor,
            row.next_due_ms,
            list(nominal_times(spec, created, until_ms=cursor)),
        )
        out.timelines[row.name] = line
        out.schedules += 1
        out.timetable += len(line.timetable)
        covered: Counter[int] = Counter()
        fired = skipped = 0
        for fire in by_name.get(row.name, []):
            nominal, until = int(fire.nominal_ms), int(fire.until_ms)
            if fire.outcome == "SKIPPED":
                run = list(nominal_times(spec, nominal - 1, until_ms=until))
                if fire.triggered:
                    run = [nominal]
                if len(run) != fire.count or run[:1] != [nominal]:
                    out.stray += 1
                    out._problem(f"{row.name}: skipped run {nominal}..{until} is not {fire.count}")
                for n in run:
                    covered[n] += 1
                    line.skipped[n] = fire.reason
                    out.reasons[fire.reason] += 1
                skipped += fire.count
                out.skipped += fire.count
                continue
            if fire.count != 1 or until != nominal:
                out.stray += 1
                out._problem(f"{row.name}: {fire.outcome} row {nominal} covers {fire.count}")
            covered[nominal] += 1
            if fire.outcome == "BUFFERED":
                line.buffered.append(nominal)
                out.buffered += 1
                continue
            line.started.append(nominal)
            out.started += 1
            late = int(fire.decided_at_ms) - int(fire.due_ms)
            out.worst_late_ms = max(out.worst_late_ms, late)
            fired += 1
            ident = fire.instance_id
            out.ids.append(ident)
            started_ids.add(ident)
            if ident != instance_id(row.name, nominal):
                out.wrong_id += 1
                out._problem(f"{row.name}: {nominal} started {ident}")
            if ident not in instances:
                out.absent += 1
                out._problem(f"{row.name}: {ident} is not in wiggle_instances")
        named = set(line.timetable)
        triggered = {int(f.nominal_ms) for f in by_name.get(row.name, []) if f.triggered}
        for n in line.timetable:
            if covered[n] == 0:
                out.missing += 1
                out._problem(f"{row.name}: nominal time {n} decided by no row")
        for n, c in covered.items():
            if c > 1:
                out.doubled += c - 1
                out._problem(f"{row.name}: nominal time {n} decided {c} times")
            if n not in named and n not in triggered:
                out.stray += 1
                out._problem(f"{row.name}: nominal time {n} decided, named by no timetable")
        if (row.fired, row.skipped) != (fired, skipped):
            out.counters += 1
            out._problem(f"{row.name}: counts {row.fired}/{row.skipped}, rows {fired}/{skipped}")
        line.started.sort()
    for ident in instances - started_ids:
        schedule = ident.rsplit("-", 1)[0]
        if schedule in out.timelines and nominal_from_instance_id(schedule, ident) is not None:
            out.orphans += 1
            out._problem(f"{ident}: an instance of {schedule} without its STARTED row")
    return out


def tally(
    checker: Checker, cluster: Cluster, scenario: str, found: FireAudit, *, fault: str
) -> Tally:
    """The ledger line of a schedule scenario: the started instances as `Checker.tally` counts
    them (lost: a STARTED row whose instance is not there). Their flows run no task, so there is
    no worker ledger to count executions by: a duplicate event here is an instance started, a
    step completed or an instance ended more than once."""
    t = checker.tally(scenario, found.ids, cluster.ledger, cluster.stats, fault=fault)
    kinds = ["instance_started", "step_completed", "instance_completed"]
    seen = Counter((e.instance_id, e.kind, e.node_id) for e in checker.events(found.ids, kinds))
    t.duplicate_events = sum(n - 1 for n in seen.values())
    return t
