"""Human tasks as a person reads them (docs/human-tasks.md): the views of task rows, each in the
state it is in now, who may see a task, one task with its audit trail, and a person's inbox.

Whether a task can still be acted on is read from its token each time: open while the token is
AWAITING at the task's node, in a RUNNING instance, and the task is that token's newest. The
actions on tasks are engine/ops/tasks.py's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy import Connection, func, select

from wiggle.errors import InvalidRequest, NotFound, PermissionDenied

from ..machine.human import CLAIMED, COMPLETED, OPEN, OPEN_STATES
from ..machine.tx import loads
from ..model.types import InstanceStatus, Json, TokenState
from ..store import schema as s
from ..store.queries import id_chunks

__all__ = [
    "CANCELLED",
    "EXPIRED",
    "STATES",
    "Approval",
    "TaskAction",
    "TaskAnswer",
    "TaskView",
    "eligible",
    "list_tasks",
    "show",
    "task_row",
    "views",
    "visible",
    "with_actions",
]

_h = s.human_tasks
_a = s.human_task_actions
_t = s.tokens
_i = s.instances

#: Read, never written: the task's step moved on without it, its deadline passed first.
EXPIRED = "EXPIRED"
#: Read, never written: the task's step moved on without it otherwise (the instance was
#: cancelled or failed, the token reset or migrated away, or the step was entered again).
CANCELLED = "CANCELLED"
STATES = (OPEN, CLAIMED, COMPLETED, CANCELLED, EXPIRED)

#: How many rows a listing reads at most before the person filter (newest first by due time).
_LIST_SCAN = 5000


@dataclass(frozen=True)
class Approval:
    """One person's answer to a task (a task that needs N approvals has up to N)."""

    by: str
    answer: Json
    at_ms: int

    def as_json(self) -> dict[str, Json]:
        return {"by": self.by, "answer": self.answer, "at_ms": self.at_ms}


@dataclass(frozen=True)
class TaskAction:
    """A row of a task's audit trail."""

    seq: int
    at_ms: int
    actor: str
    action: str  # claim | unclaim | approve | complete | reassign
    detail: Json
    request_id: str | None


@dataclass(frozen=True)
class TaskView:
    task_id: str
    instance_id: str
    token_id: str
    node_id: str
    flow: str
    version: str
    title: str
    instructions: str | None
    form: Json
    assignee: str | None
    candidate_people: tuple[str, ...]
    candidate_groups: tuple[str, ...]
    excluded: tuple[str, ...]
    approvals: int  # how many different people must answer
    created_at_ms: int
    due_at_ms: int | None
    deadline_at_ms: int | None
    state: str  # OPEN | CLAIMED | COMPLETED | CANCELLED | EXPIRED
    claimed_by: str | None
    completed_by: str | None
    completed_at_ms: int | None
    answer: Json  # the payload the flow got (None until COMPLETED)
    approved: tuple[Approval, ...] = ()  # the answers so far, in order
    actions: tuple[TaskAction, ...] = field(default=())  # show_task only
    reminded_count: int = 0  # how many of its reminders were recorded
    last_reminded_at_ms: int | None = None
    next_remind_at_ms: int | None = None  # while open: when the next reminder falls due

    @property
    def open(self) -> bool:
        return self.state in OPEN_STATES


@dataclass(frozen=True)
class TaskAnswer:
    """What an action did: the task after it, and (`complete`) whether this answer completed
    the task. `replayed`: the request id had been used; nothing was applied this time."""

    task: TaskView
    completed: bool = False
    replayed: bool = False


def _approvals_of(conn: Connection, task_ids: Sequence[str]) -> dict[str, list[Approval]]:
    out: dict[str, list[Approval]] = {}
    if not task_ids:
        return out
    for chunk in id_chunks(task_ids):
        rows = conn.execute(
            select(_a.c.task_id, _a.c.actor, _a.c.detail, _a.c.at_ms)
            .where(
                _a.c.task_id.in_(chunk),
                _a.c.action.in_(("approve", "complete")),
            )
            .order_by(_a.c.task_id, _a.c.seq)
        ).all()
        for row in rows:
            answer = loads(row.detail).get("answer")
            out.setdefault(row.task_id, []).append(Approval(row.actor, answer, int(row.at_ms)))
    return out


def views(conn: Connection, rows: Sequence[Any], now_ms: int) -> list[TaskView]:
    """Task rows as views, each with the state it is in now (read from its token)."""
    if not rows:
        return []
    token_ids = sorted({r.token_id for r in rows})
    tokens: dict[str, Any] = {}
    newest: dict[str, int] = {}
    for chunk in id_chunks(token_ids):
        for row in conn.execute(
            select(_t.c.id, _t.c.state, _t.c.node_id, _i.c.status)
            .select_from(_t.join(_i, _i.c.id == _t.c.instance_id))
            .where(_t.c.id.in_(chunk))
        ):
            tokens[row.id] = row
        for token_id, top in conn.execute(
            select(_h.c.token_id, func.max(_h.c.token_seq))
            .where(_h.c.token_id.in_(chunk))
            .group_by(_h.c.token_id)
        ):
            newest[token_id] = int(top)
    approvals = _approvals_of(conn, [r.id for r in rows])
    out = []
    for r in rows:
        state = r.state
        if state in OPEN_STATES:
            tok = tokens.get(r.token_id)
            waiting = (
                tok is not None
                and tok.state == TokenState.AWAITING.value
                and tok.node_id == r.node_id
                and tok.status == InstanceStatus.RUNNING.value
                and newest.get(r.token_id) == r.token_seq
            )
            if not waiting:
                expired = r.deadline_at_ms is not None and r.deadline_at_ms <= now_ms
                state = EXPIRED if expired else CANCELLED
        out.append(
            TaskView(
                task_id=r.id,
                instance_id=r.instance_id,
                token_id=r.token_id,
                node_id=r.node_id,
                flow=r.flow,
                version=r.version,
                title=r.title,
                instructions=r.instructions,
                form=loads(r.form),
                assignee=r.assignee,
                candidate_people=tuple(loads(r.candidate_people)),
                candidate_groups=tuple(loads(r.candidate_groups)),
                excluded=tuple(loads(r.excluded)),
                approvals=int(r.approvals),
                created_at_ms=int(r.created_at_ms),
                due_at_ms=r.due_at_ms,
                deadline_at_ms=r.deadline_at_ms,
                state=state,
                claimed_by=r.claimed_by if state == CLAIMED else None,
                completed_by=r.completed_by,
                completed_at_ms=r.completed_at_ms,
                answer=None if r.answer is None else loads(r.answer),
                approved=tuple(approvals.get(r.id, ())),
                reminded_count=int(r.reminded_count),
                last_reminded_at_ms=r.last_reminded_at_ms,
                next_remind_at_ms=r.next_remind_at_ms if state in OPEN_STATES else None,
            )
        )
    return out


def _actions(conn: Connection, task_id: str) -> tuple[TaskAction, ...]:
    rows = conn.execute(select(*_a.c).where(_a.c.task_id == task_id).order_by(_a.c.seq)).all()
    return tuple(
        TaskAction(int(r.seq), int(r.at_ms), r.actor, r.action, loads(r.detail), r.request_id)
        for r in rows
    )


def task_row(conn: Connection, task_id: str) -> Any:
    row = conn.execute(select(*_h.c).where(_h.c.id == task_id)).first()
    if row is None:
        raise NotFound(f"no human task with id {task_id!r}")
    return row


def eligible(view: TaskView, person: str, groups: Sequence[str]) -> bool:
    """Whether `person` (a member of `groups`) is one the task is for: its assignee, one of
    its candidate people, or a member of one of its candidate groups (exclusions aside)."""
    return (
        person == view.assignee
        or person in view.candidate_people
        or bool(set(groups) & set(view.candidate_groups))
    )


def visible(view: TaskView, person: str, groups: Sequence[str]) -> bool:
    """A person sees the tasks they acted on, and those they may act on (not excluded)."""
    if person in (view.claimed_by, view.completed_by) or any(a.by == person for a in view.approved):
        return True
    return person not in view.excluded and eligible(view, person, groups)


def show(
    conn: Connection,
    now_ms: int,
    task_id: str,
    person: str,
    groups: Sequence[str] = (),
    *,
    admin: bool = False,
) -> TaskView:
    """One task with its audit trail; a person sees only the tasks they may act on or acted
    on (PermissionDenied otherwise)."""
    (view,) = views(conn, [task_row(conn, task_id)], now_ms)
    if not admin and not visible(view, person, groups):
        raise PermissionDenied(f"{person!r} may not see human task {task_id!r}")
    return with_actions(conn, view)


def with_actions(conn: Connection, view: TaskView) -> TaskView:
    return replace(view, actions=_actions(conn, view.task_id))


def list_tasks(
    conn: Connection,
    now_ms: int,
    person: str,
    groups: Sequence[str] = (),
    *,
    admin: bool = False,
    states: Sequence[str] = (OPEN, CLAIMED),
    instance_id: str | None = None,
    limit: int = 100,
) -> list[TaskView]:
    """The tasks in `states` that `person` may act on (all of them for an admin), soonest
    due first (tasks with no due time last, then by creation)."""
    wanted = set(states) or set(STATES)
    unknown = wanted - set(STATES)
    if unknown:
        raise InvalidRequest(
            f"unknown task state {sorted(unknown)[0]!r}; the states are {', '.join(STATES)}"
        )
    q = select(*_h.c)
    stored = set()
    for state in wanted:
        # A task CANCELLED or EXPIRED is still OPEN or CLAIMED as written.
        stored |= {OPEN, CLAIMED} if state in (CANCELLED, EXPIRED) else {state}
    q = q.where(_h.c.state.in_(sorted(stored)))
    if instance_id is not None:
        q = q.where(_h.c.instance_id == instance_id)
    q = q.order_by(_h.c.due_at_ms.is_(None), _h.c.due_at_ms, _h.c.created_at_ms, _h.c.id)
    rows = conn.execute(q.limit(_LIST_SCAN)).all()
    out = []
    for view in views(conn, rows, now_ms):
        if view.state not in wanted:
            continue
        if not admin and not visible(view, person, groups):
            continue
        out.append(view)
        if len(out) >= limit:
            break
    return out
