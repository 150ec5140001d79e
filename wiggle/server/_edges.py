"""What every request's identifiers must satisfy before the engine sees them.

Checked at the edge, for every method, so that the database never meets a value its columns
cannot hold (an over-long id would otherwise surface as an internal error on PostgreSQL) and no
error message repeats an unbounded value (error messages travel in gRPC headers). Empty values
pass here: whether a field is required is the method's own business.

Free text a worker reports (a step's failure message, a handback reason) is cut to the reason
limit instead of refused: refusing the report would strand the task it reports on.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from wiggle._limits import (
    MAX_ACTIVITIES,
    MAX_NAME_CHARS,
    MAX_QUEUES,
    MAX_REASON_CHARS,
    identifier_problem,
    quote,
)
from wiggle.errors import InvalidRequest

__all__ = ["check_request"]

_Fields = Callable[[Any], Iterable[tuple[str, str]]]


def _eager(msg: Any) -> Iterable[tuple[str, str]]:
    yield "worker id", msg.worker_id
    yield from (("queue", q) for q in msg.queues)
    yield from (("activity", a) for a in msg.activities)


def _report(request: Any) -> Iterable[tuple[str, str]]:
    yield "task id", request.task_id
    yield "lease", request.lease


def _start(r: Any) -> Iterable[tuple[str, str]]:
    yield from (("flow name", r.flow), ("version", r.version), ("instance id", r.instance_id))
    if r.HasField("eager"):
        yield from _eager(r.eager)


def _poll(r: Any) -> Iterable[tuple[str, str]]:
    yield from (("worker id", r.worker_id), ("sdk", r.sdk))
    yield from (("queue", q) for q in r.queues)
    yield from (("activity", a) for a in r.activities)


def _complete(r: Any) -> Iterable[tuple[str, str]]:
    yield from _report(r)
    if r.HasField("next"):
        yield from _eager(r.next)


def _advance(r: Any) -> Iterable[tuple[str, str]]:
    yield from _report(r)
    yield from (("node id", s.node_id) for s in r.steps)


def _list_instances(r: Any) -> Iterable[tuple[str, str]]:
    # Filters are searches, not addresses: a value no flow can have simply matches nothing.
    yield from (("flow filter", r.flow), ("version", r.version))
    yield from (("page token", r.page_token), ("instance id part", r.id_contains))


def _actor(r: Any) -> Iterable[tuple[str, str]]:
    """Who acts on a human task, as the request says (a server without credentials)."""
    yield ("person", r.actor.person)
    yield from (("group", g) for g in r.actor.groups)


_FIELDS: dict[str, _Fields] = {
    "RegisterDefinition": lambda r: [("file name", r.filename)],
    "GetDefinition": lambda r: [("flow name", r.name), ("version", r.version)],
    "ListDefinitions": lambda r: [("flow filter", r.name)],
    "StartInstance": _start,
    "SignalInstance": lambda r: [("instance id", r.instance_id), ("signal name", r.name)],
    "CancelInstance": lambda r: [("instance id", r.instance_id), ("reason", r.reason)],
    "DescribeInstance": lambda r: [("instance id", r.instance_id)],
    "WaitInstance": lambda r: [("instance id", r.instance_id)],
    "ListInstances": _list_instances,
    "ListIncidents": lambda r: [("flow filter", r.flow), ("version", r.version)],
    "PollTasks": _poll,
    "EndPolls": lambda r: [("worker id", r.worker_id)],
    "CompleteTask": _complete,
    "FailTask": _report,
    "ReleaseTask": _report,
    "Heartbeat": lambda r: [*_report(r), ("node id", r.node_id)],
    "AdvanceRun": _advance,
    "RetryInstance": lambda r: [("instance id", r.instance_id)],
    "ResetInstance": lambda r: [("instance id", r.instance_id), ("node id", r.node_id)],
    "GetBatch": lambda r: [("batch id", r.batch_id)],
    "UpdateBatch": lambda r: [("batch id", r.batch_id)],
    "StartBulk": lambda r: [("requested by", r.requested_by)],
    "PlanMigration": lambda r: [
        ("flow name", r.flow),
        ("version", r.to),
        *(("version", v) for v in getattr(r, "from")),
        *(("node id", n) for pair in r.map.items() for n in pair),
    ],
    "ApplyMigration": lambda r: [("requested by", r.requested_by)],
    "RollbackMigration": lambda r: [("batch id", r.batch_id), ("requested by", r.requested_by)],
    "ApplySchedule": lambda r: [("file name", r.filename)],
    "ListSchedules": lambda r: [("flow filter", r.flow)],
    "DescribeSchedule": lambda r: [("schedule name", r.name)],
    "PauseSchedule": lambda r: [("schedule name", r.name), ("note", r.note)],
    "UnpauseSchedule": lambda r: [("schedule name", r.name)],
    "TriggerSchedule": lambda r: [("schedule name", r.name)],
    "DeleteSchedule": lambda r: [("schedule name", r.name)],
    "PreviewBackfill": lambda r: [("schedule name", r.name), ("overlap", r.overlap)],
    "ListHumanTasks": lambda r: [*_actor(r), ("instance id", r.instance_id)],
    "GetHumanTask": lambda r: [*_actor(r), ("task id", r.task_id)],
    "ClaimHumanTask": lambda r: [*_actor(r), ("task id", r.task_id), ("request id", r.request_id)],
    "UnclaimHumanTask": lambda r: [
        *_actor(r),
        ("task id", r.task_id),
        ("request id", r.request_id),
    ],
    "ReassignHumanTask": lambda r: [
        *_actor(r),
        ("task id", r.task_id),
        ("person", r.to),
        ("request id", r.request_id),
    ],
    "CompleteHumanTask": lambda r: [
        *_actor(r),
        ("task id", r.task_id),
        ("request id", r.request_id),
    ],
    "StartBackfill": lambda r: [
        ("schedule name", r.name),
        ("overlap", r.overlap),
        ("requested by", r.requested_by),
    ],
}

#: As the schedule schema's name pattern (spec/schema/schedule.schema.json): a name no schedule
#: can have is refused here, before it reaches a 64-character column.
_SCHEDULE_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,45}")


def _lists(method: str, request: Any) -> Iterable[tuple[str, int, int]]:
    """(what, how many, the most allowed) of each list of names `request` carries."""
    eager = request if method == "PollTasks" else None
    if method == "StartInstance" and request.HasField("eager"):
        eager = request.eager
    elif method == "CompleteTask" and request.HasField("next"):
        eager = request.next
    if eager is not None:
        yield "queues", len(eager.queues), MAX_QUEUES
        yield "activities", len(eager.activities), MAX_ACTIVITIES


def check_request(method: str, request: Any) -> None:
    """Raise InvalidRequest naming the first identifier of `request` that breaks its rule (or a
    list of names longer than its limit); cut over-long free text in reports to the reason
    limit."""
    fields = _FIELDS.get(method)
    if fields is None:
        return
    for what, count, most in _lists(method, request):
        if count > most:
            raise InvalidRequest(f"{method}: a request names at most {most} {what}; got {count}")
    for kind, value in fields(request):
        if not value:
            continue
        problem = _problem(kind, value)
        if problem is not None:
            raise InvalidRequest(f"{method}: {problem}")
    _cut_free_text(method, request)


def _problem(kind: str, value: str) -> str | None:
    if kind in ("instance id", "task id", "lease", "batch id"):
        problem = identifier_problem("instance id", value)
        return None if problem is None else problem.replace("instance id", kind)
    if kind == "instance id part":
        return _longer_than(kind, value, 64)
    if kind == "version":
        return _longer_than(kind, value, 80)
    if kind in ("reason", "note"):
        return _longer_than(kind, value, MAX_REASON_CHARS)
    if kind == "schedule name":
        if _SCHEDULE_NAME.fullmatch(value):
            return None
        return (
            f"schedule name {quote(value)} is not a schedule's name: 1 to 46 lower-case "
            "letters, digits and . _ -, starting with a letter or digit"
        )
    if kind in (
        "file name",
        "page token",
        "flow filter",
        "requested by",
        "overlap",
        "person",
        "group",
        "request id",
    ):
        return _longer_than(kind, value, MAX_NAME_CHARS)
    if kind == "sdk":
        return _longer_than(kind, value, 100)
    return identifier_problem(kind, value)


def _longer_than(kind: str, value: str, most: int) -> str | None:
    if len(value) <= most:
        return None
    return f"a {kind} has at most {most} characters; got {len(value)}"


def _cut_free_text(method: str, request: Any) -> None:
    if method == "FailTask":
        _cut_failure(request.failure)
    elif method == "AdvanceRun":
        request.handback_reason = request.handback_reason[:MAX_REASON_CHARS]
        for step in request.steps:
            if step.WhichOneof("outcome") == "failure":
                _cut_failure(step.failure)
    elif method == "ReleaseTask":
        request.reason = request.reason[:MAX_REASON_CHARS]


def _cut_failure(failure: Any) -> None:
    failure.message = failure.message[:MAX_REASON_CHARS]
    failure.error_type = failure.error_type[:MAX_NAME_CHARS]
