"""The firing rules (docs/schedules.md), pure: which due nominal times fire and which are
skipped, what a fire does while the last one still runs, each fire's jitter, and the id of the
instance a nominal time starts. The engine applies them in the transaction that records each
fire; `wiggle test` applies them on its virtual clock.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from wiggle.expressions import compile_expression
from wiggle.schedules._model import CatchUp, Schedule

__all__ = [
    "GRACE_MS",
    "Decision",
    "catch_up",
    "fire_input",
    "instance_id",
    "jitter_ms",
    "nominal_from_instance_id",
    "overlap",
    "rfc3339",
]

#: A fire this late, or less, is on time; later, it was missed (no server fired it) and the
#: catch-up rule decides. A leader's tick is far shorter, so only an outage makes a fire late.
GRACE_MS = 60_000


@dataclass(frozen=True)
class Decision:
    """What becomes of one due nominal time: fire it, or skip it for `reason`."""

    nominal_ms: int
    fire: bool
    reason: str = ""


def catch_up(due: list[tuple[int, int]], now_ms: int, rule: CatchUp) -> list[Decision]:
    """Decide each due nominal time, given as (nominal, due) with due = nominal + jitter, oldest
    first. On-time ones fire. Missed ones (late by more than GRACE_MS): none older than the
    window; then `none` fires none of them, `latest` the newest only when nothing on time
    fires, `all` each (at most `at_most`, the newest)."""
    on_time = [n for n, d in due if now_ms - d <= GRACE_MS]
    missed = [n for n, d in due if now_ms - d > GRACE_MS]
    decided: dict[int, Decision] = {n: Decision(n, True) for n in on_time}
    keep: list[int] = []
    for n in missed:
        if rule.window_ms is not None and now_ms - n > rule.window_ms:
            decided[n] = Decision(n, False, "missed, older than the catch-up window")
        else:
            keep.append(n)
    if rule.missed == "none":
        chosen: set[int] = set()
    elif rule.missed == "latest":
        chosen = {keep[-1]} if keep and not on_time else set()
    else:
        chosen = set(keep if rule.at_most is None else keep[-rule.at_most :])
    for n in keep:
        if n in chosen:
            decided[n] = Decision(n, True)
        else:
            decided[n] = Decision(n, False, _missed_reason(rule, bool(on_time)))
    return [decided[n] for n, _ in due]


def _missed_reason(rule: CatchUp, on_time: bool) -> str:
    if rule.missed == "none":
        return "missed while no server fired it (catch_up: none)"
    if rule.missed == "latest":
        later = "a fire on time" if on_time else "a later missed fire"
        return f"missed; only the latest is caught up, and {later} was"
    return f"missed; at most {rule.at_most} missed fires are caught up"


def overlap(policy: str, running: bool, buffered: int) -> str:
    """What a fire does, given whether the instance of the schedule's last fire still runs and
    how many fires already wait for it: "start", "buffer", "cancel" (the running one, then
    start) or "skip"."""
    if not running and buffered == 0:
        return "start"
    if policy == "allow_all":
        return "start"
    if policy == "cancel_running":
        return "cancel"
    if policy == "buffer_all" or (policy == "buffer_one" and buffered == 0):
        return "buffer"
    return "skip"


def jitter_ms(schedule: str, nominal_ms: int, jitter: int) -> int:
    """The fire's delay after its nominal time, in [0, jitter): drawn from the schedule's name
    and the nominal time, so every server and every run agrees on it."""
    if jitter <= 0:
        return 0
    digest = hashlib.sha256(f"{schedule}\0{nominal_ms}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % jitter


def instance_id(schedule: str, nominal_ms: int) -> str:
    """`<schedule>-<YYYYMMDDTHHMMSSZ>`: the one instance a nominal time may start."""
    stamp = datetime.fromtimestamp(nominal_ms / 1000, UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{schedule}-{stamp}"


def nominal_from_instance_id(schedule: str, ident: str) -> int | None:
    """The nominal time an instance id of `schedule` names, or None when it names none."""
    prefix = f"{schedule}-"
    if not ident.startswith(prefix):
        return None
    try:
        moment = datetime.strptime(ident[len(prefix) :], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None
    return int(moment.timestamp() * 1000)


def fire_input(schedule: Schedule, ident: str, nominal_ms: int, now_ms: int) -> Any:
    """The input of the instance a fire starts: `input`, with each `input_values` expression's
    value set, evaluated with `ctx` the input and `instance` naming the instance, flow,
    schedule, nominal time and fire time (RFC 3339, UTC). EvaluationError when one fails."""
    data = schedule.input
    if not schedule.input_values:
        return data
    instance = {
        "id": ident,
        "flow": schedule.flow,
        "schedule": schedule.name,
        "nominal_time": rfc3339(nominal_ms),
        "fire_time": rfc3339(now_ms),
    }
    out = dict(data)
    for key, source in schedule.input_values:
        out[key] = compile_expression(source).evaluate(data, instance)
    return out


def rfc3339(ms: int) -> str:
    """An instant as RFC 3339 in UTC, to the millisecond."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
