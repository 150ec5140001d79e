"""Acknowledged steps: what a fault server answered "done" for, checked against the tables later.

Before a report (CompleteTask, AdvanceRun, or either inside a ReportBatch) reaches the engine, the
fault server reads where each reported task stands (instance, node, attempt); once the worker has
been answered without an error, it appends one `acked TASK LEASE SEQ N INSTANCE NODE ATTEMPT` line
per step the report completed (N: the step's place in the report). `lost_acks` counts the
acknowledged steps the database does not hold a `step_completed` event for: a step acknowledged
and then lost (to a failover, say) has to run again, under a later attempt.

Only a report this call applies is noted: its task leased under the report's lease, its seq
not applied yet. A report sent again after an answer that never arrived (a connection dropped
during its COMMIT) is answered from what the first one left behind: the task stands at the next
step by then, so its place says nothing of the step reported. Such answers are noted apart
(`answered-again TASK LEASE SEQ`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import text

#: A completing report: (task id, lease, seq, the later steps' node ids that succeeded), the
#: later steps being those of an AdvanceRun after its first.
Reported = tuple[str, str, int, list[str]]


def _one(kind: str, msg: Any) -> Reported | None:
    if kind == "complete":
        return (msg.task_id, msg.lease, msg.seq, [])
    if kind == "advance":
        ok = [s for s in msg.steps if s.WhichOneof("outcome") != "failure"]
        if not msg.steps or msg.steps[0].WhichOneof("outcome") == "failure":
            return None
        later = [s.node_id for s in ok[1:]]
        return (msg.task_id, msg.lease, msg.seq, later)
    return None


def reported(method: str, request: Any) -> list[Reported | None]:
    """Each report of `request` that completes steps (None for the others), in order."""
    if method == "CompleteTask":
        return [_one("complete", request)]
    if method == "AdvanceRun":
        return [_one("advance", request)]
    if method == "ReportBatch":
        return [
            _one(kind, getattr(r, kind)) if (kind := r.WhichOneof("report")) else None
            for r in request.reports
        ]
    return []


@dataclass(frozen=True)
class Standing:
    """Where a task stands before a report of it is applied."""

    instance: str
    node: str
    attempt: int
    state: str
    lease: str | None
    report_seq: int  # the last seq applied under `lease`

    def applies(self, lease: str, seq: int) -> bool:
        """Whether a report (`lease`, `seq`) is applied now, rather than answered again from
        what an earlier copy of it left behind (or refused)."""
        held = self.state == "LEASED" and self.lease == lease
        return held and (seq <= 0 or seq > self.report_seq)  # seq 0: a report without one


def where(engine: Any, task_ids: Iterable[str]) -> dict[str, Standing]:
    """Where each task stands now (before the report is applied)."""
    ids = list(task_ids)
    if not ids:
        return {}
    rows = engine.db.read(
        lambda c: c.execute(
            text(
                "SELECT id, instance_id, node_id, attempt, state, lease, report_seq "
                "FROM wiggle_tokens WHERE id = ANY(:ids)"
            ),
            {"ids": ids},
        ).all()
    )
    return {
        r.id: Standing(
            r.instance_id, r.node_id, int(r.attempt), r.state, r.lease, int(r.report_seq)
        )
        for r in rows
    }


def ack_lines(reports: list[Reported | None], at: dict[str, Standing], ok: list[bool]) -> list[str]:
    lines = []
    for report, answered in zip(reports, ok, strict=True):
        if report is None or not answered or report[0] not in at:
            continue
        task, lease, seq, later = report
        standing = at[task]
        if not standing.applies(lease, seq):
            lines.append(f"answered-again {task} {lease} {seq}")
            continue
        instance, node, attempt = standing.instance, standing.node, standing.attempt
        steps = [(node, attempt), *((n, 1) for n in later)]
        for n, (step_node, step_attempt) in enumerate(steps):
            lines.append(f"acked {task} {lease} {seq} {n} {instance} {step_node} {step_attempt}")
    return lines


def lost_acks(stats: Path, sa: Any) -> tuple[int, int, int]:
    """(acknowledged steps, of which without their step_completed event, reports answered
    again)."""
    acked: set[tuple[str, ...]] = set()
    again: set[tuple[str, ...]] = set()
    if stats.exists():
        for line in stats.read_text().splitlines():
            parts = line.split()
            if parts and parts[0] == "acked":
                acked.add(tuple(parts[1:]))
            elif parts and parts[0] == "answered-again":
                again.add(tuple(parts[1:]))
    wanted: Counter[tuple[str, str, int]] = Counter((a[4], a[5], int(a[6])) for a in acked)
    instances = sorted({w[0] for w in wanted})
    held: Counter[tuple[str, str, int]] = Counter()
    with sa.connect() as conn:
        for i in range(0, len(instances), 500):
            rows = conn.execute(
                text(
                    "SELECT instance_id, node_id, attempt FROM wiggle_events "
                    "WHERE kind = 'step_completed' AND instance_id = ANY(:ids)"
                ),
                {"ids": instances[i : i + 500]},
            ).all()
            held.update((r.instance_id, r.node_id, int(r.attempt)) for r in rows)
    lost = sum(max(0, n - held[key]) for key, n in wanted.items())
    return len(acked), lost, len(again)
