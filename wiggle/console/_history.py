"""Step history: every attempt of every step of an instance, from the events the engine writes.

Pure: events in, attempts out. Per step (a task, predicate, combine or apply step) and attempt:

- `step_started` (a worker leased it; detail `worker`) opens the attempt;
- `step_completed` closes it completed (a predicate's detail says true or false);
- `step_failed` closes it failed (detail `message`, `error_type`), after `lease_expired` (detail
  `worker`) when no report came in time; `step_retried` (detail `delay_ms`) says when the next
  attempt may start;
- `handed_back` with the attempt's number closes it given back unrun (detail `reason`);
- the instance's end (`instance_cancelled`, `instance_failed`, `instance_completed`) and a reset
  (`instance_reset`) close every attempt still open as `cut off`: its worker's report, if it
  comes, is refused, so the step did not complete here whatever the worker did.

A worker running steps back to back in a local run (LOCAL_SYNC, LOCAL_ASYNC) leases the first
only: the others have no `step_started`, so their start is the end of the step before them in
the same branch, marked `chained` (in LOCAL_ASYNC every step of the run is reported at once, so
their times are the report's). A branch's events name their branch (a fork's name, a for_each
item's index), starts included, so where several branches run one node at once a node's starts
and ends are paired by branch (oldest first for starts recorded before they named it).

The engine keeps each top-level node's last input (what a reset to it rewinds to), which the
page shows under the step's last attempt (DescribeInstance's `step_inputs`); it does not record
each attempt's input and output contexts: `Attempt.input` and `Attempt.output` are where they go
once events carry them (detail `input`, `output`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["Attempt", "EventLike", "Step", "step_history"]


class EventLike(Protocol):
    @property
    def at_ms(self) -> int: ...

    @property
    def kind(self) -> str: ...

    @property
    def node_id(self) -> str: ...

    @property
    def attempt(self) -> int: ...

    @property
    def detail(self) -> Any: ...


@dataclass
class Attempt:
    node_id: str
    attempt: int
    branch: str = ""
    started_ms: int = 0  # 0: not recorded
    ended_ms: int = 0  # 0: not ended (still running)
    worker: str = ""
    outcome: str = "running"  # running | completed | failed | lease expired | handed back | cut off
    error: str = ""
    error_type: str = ""
    predicate: bool | None = None
    retry_in_ms: int | None = None  # set when a failure was retried after this pause
    handed_back: str = ""  # the reason a worker gave it back
    cut_off_by: str = ""  # what ended it while it ran: "instance cancelled", "instance reset", ...
    chained: bool = False  # started by the worker right after the step before it (local run)
    input: Any = None  # the context the step received (once the engine records it)
    output: Any = None  # the context it returned (once the engine records it)

    @property
    def duration_ms(self) -> int | None:
        if not self.started_ms or not self.ended_ms:
            return None
        return max(0, self.ended_ms - self.started_ms)


@dataclass
class Step:
    node_id: str
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def last(self) -> Attempt:
        return self.attempts[-1]


def _detail(ev: EventLike) -> Mapping[str, Any]:
    return ev.detail if isinstance(ev.detail, Mapping) else {}


class _Builder:
    def __init__(self) -> None:
        self.steps: dict[str, Step] = {}
        self.open: dict[tuple[str, int], list[Attempt]] = {}
        self.last_end: dict[str, int] = {}  # branch -> when its last step ended
        self.expired: dict[tuple[str, int], str] = {}  # a lease ran out: by which worker

    def _add(self, a: Attempt) -> Attempt:
        self.steps.setdefault(a.node_id, Step(a.node_id)).attempts.append(a)
        return a

    def start(self, ev: EventLike) -> None:
        branch = str(_detail(ev).get("branch", ""))
        a = self._add(
            Attempt(ev.node_id, ev.attempt, branch, started_ms=ev.at_ms, worker=_worker(ev))
        )
        self.open.setdefault((ev.node_id, ev.attempt), []).append(a)

    def closing(self, ev: EventLike) -> Attempt:
        """The open attempt this event ends, or a new one for a step chained on the worker."""
        waiting = self.open.get((ev.node_id, ev.attempt))
        branch = str(_detail(ev).get("branch", ""))
        if waiting:
            # The start of the same branch, when starts name theirs; else the oldest.
            same = [a for a in waiting if a.branch == branch]
            a = same[0] if same else waiting[0]
            waiting.remove(a)
            a.branch = branch
            return a
        started = self.last_end.get(branch, 0)
        return self._add(
            Attempt(ev.node_id, ev.attempt, branch, started_ms=started, chained=bool(started))
        )

    def end(self, ev: EventLike, a: Attempt, outcome: str) -> None:
        a.ended_ms, a.outcome = ev.at_ms, outcome
        self.last_end[a.branch] = ev.at_ms
        detail = _detail(ev)
        if "input" in detail:
            a.input = detail["input"]
        if "output" in detail:
            a.output = detail["output"]

    def cut_off(self, ev: EventLike, by: str) -> None:
        """Close every attempt still open: the instance ended or was reset while they ran."""
        for waiting in self.open.values():
            for a in waiting:
                self.end(ev, a, "cut off")
                a.cut_off_by = by
        self.open.clear()


#: Events after which no attempt open before them can end: its lease is fenced.
_CUTTING = {
    "instance_cancelled": "instance cancelled",
    "instance_failed": "instance failed",
    "instance_completed": "instance completed",
    "instance_reset": "instance reset",
}


def _worker(ev: EventLike) -> str:
    return str(_detail(ev).get("worker", ""))


def step_history(events: Iterable[EventLike]) -> list[Step]:
    """Every step an instance ran, in the order each first started, with its attempts."""
    b = _Builder()
    for ev in events:
        detail = _detail(ev)
        if ev.kind == "step_started":
            b.start(ev)
        elif ev.kind == "step_completed":
            a = b.closing(ev)
            b.end(ev, a, "completed")
            if "predicate" in detail:
                a.predicate = bool(detail["predicate"])
        elif ev.kind == "lease_expired":
            b.expired[ev.node_id, ev.attempt] = _worker(ev)
        elif ev.kind == "step_failed":
            a = b.closing(ev)
            expired = b.expired.pop((ev.node_id, ev.attempt), None)
            b.end(ev, a, "lease expired" if expired is not None else "failed")
            a.worker = a.worker or (expired or "")
            a.error = str(detail.get("message", ""))
            a.error_type = str(detail.get("error_type", ""))
        elif ev.kind == "step_retried":
            failed = [x for x in b.steps.get(ev.node_id, Step("")).attempts if x.ended_ms]
            if failed:
                failed[-1].retry_in_ms = int(detail.get("delay_ms", 0))
        elif ev.kind == "handed_back" and ev.attempt > 0:
            a = b.closing(ev)
            b.end(ev, a, "handed back")
            a.handed_back = str(detail.get("reason", ""))
        elif ev.kind in _CUTTING:
            b.cut_off(ev, _CUTTING[ev.kind])
    return list(b.steps.values())
