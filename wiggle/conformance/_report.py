"""Turning run results into table rows: one per (case, mode, database), plus mode agreement."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from wiggle.conformance._check import RunResult, compare_modes

__all__ = ["Row", "format_table", "summarise"]

AGREE = "(modes agree)"


@dataclass
class Row:
    case: str
    mode: str
    database: str
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)  # not failures: e.g. a spoiled try run again

    @property
    def passed(self) -> bool:
        return not self.problems

    def as_json(self) -> dict[str, Any]:
        return {
            "case": self.case,
            "mode": self.mode,
            "database": self.database,
            "result": "pass" if self.passed else "fail",
            "problems": self.problems,
            "notes": self.notes,
            "seconds": round(self.seconds, 3),
        }


def summarise(results: Sequence[RunResult]) -> list[Row]:
    rows: dict[tuple[str, str, str], Row] = {}
    by_run: dict[tuple[str, str, int], list[RunResult]] = defaultdict(list)
    for r in results:
        row = rows.setdefault((r.case_id, r.mode, r.database), Row(r.case_id, r.mode, r.database))
        row.problems += [f"run {r.run}: {p}" for p in r.problems]
        row.notes += [f"run {r.run}: {n}" for n in r.notes]
        row.seconds += r.seconds
        by_run[(r.case_id, r.database, r.run)].append(r)
    agree: dict[tuple[str, str], Row] = {}
    for (case, database, _run), runs in by_run.items():
        if len({r.mode for r in runs}) < 2:
            continue
        row = agree.setdefault((case, database), Row(case, AGREE, database))
        row.problems += compare_modes(runs)
    ordered = sorted([*rows.values(), *agree.values()], key=lambda r: (r.case, r.database))
    return ordered


def format_table(rows: Sequence[Row]) -> str:
    width = max([len("case"), *(len(r.case) for r in rows)])
    mode_width = max([len("mode"), *(len(r.mode) for r in rows)])
    db_width = max([len("database"), *(len(r.database) for r in rows)])
    lines = [f"{'case':<{width}}  {'mode':<{mode_width}}  {'database':<{db_width}}  result"]
    previous = None
    for r in rows:
        if previous is not None and previous != r.case:
            lines.append("")
        previous = r.case
        verdict = f"pass ({r.seconds:.1f}s)" if r.passed and r.mode != AGREE else "pass"
        if not r.passed:
            verdict = "FAIL"
        lines.append(
            f"{r.case:<{width}}  {r.mode:<{mode_width}}  {r.database:<{db_width}}  {verdict}"
        )
        for p in r.problems:
            lines.append(f"{'':<{width}}    - {p}")
        for n in r.notes:
            lines.append(f"{'':<{width}}    ~ {n}")
    return "\n".join(lines)
