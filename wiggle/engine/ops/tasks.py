"""Human tasks: who may see, claim and answer them, and the answer reaching the flow
(docs/human-tasks.md).

A task row is written when a token parks at a human step (engine/machine/human.py). Whether it
can still be acted on is read from its token each time: open while the token is AWAITING at the
task's node, in a RUNNING instance, and the task is that token's newest. A deadline, a cancel,
a reset, a migration or a retry thus open and close tasks without writing to them.

Every action locks the instance (as a signal does) and runs in one transaction: the checks, the
audit row (`wiggle_human_task_actions`), the task's new state, the events and, when the last
approval needed arrives, the signal `task:<node>` handed to the task's own token
(ops/instances.py `deliver_signal`), so `into` and `apply` work as for any await.

A request id makes an action idempotent: it is recorded with the action (unique per task), and
the same request id again answers what was recorded the first time, applying nothing.

Reminders (`remind`) are the leader's: each due one is recorded, exactly once, by `remind` in a
transaction of its own under the instance's lock, as the event `human_task_reminded` (the seam
an operator's notifier follows) and the task's `reminded_count`.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, func, select, update

from wiggle.errors import (
    Conflict,
    InputRejected,
    InvalidRequest,
    PermissionDenied,
    TaskNotOpen,
)
from wiggle.graph import Await, HumanTask

from ..machine.human import CLAIMED, COMPLETED, OPEN, reminder_times
from ..machine.tx import TOKEN_COLUMNS, Inst, Tx, dumps, loads
from ..model.types import Json
from ..reads.tasks import (
    EXPIRED,
    Approval,
    TaskAnswer,
    TaskView,
    eligible,
    task_row,
    views,
    visible,
)
from ..store import schema as s
from .context import OpsContext
from .instances import deliver_signal, lock_instance

__all__ = ["check_answer", "claim", "complete", "reassign", "remind", "unclaim"]

_h = s.human_tasks
_a = s.human_task_actions
_t = s.tokens
_i = s.instances

# -- acting ---------------------------------------------------------------------------------


def _iso(ms: int) -> str:
    at = datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
    return at.isoformat(timespec="seconds").replace("+00:00", "Z")


def _need_person(person: str, doing: str) -> None:
    if not person:
        raise InvalidRequest(f"{doing} a human task needs the name of the person doing it")


def _not_open(view: TaskView) -> TaskNotOpen:
    what = f"human task {view.task_id!r} ({view.node_id!r} of instance {view.instance_id!r})"
    if view.state == COMPLETED:
        at = _iso(view.completed_at_ms or 0)
        return TaskNotOpen(
            view.task_id, view.state, f"{what} was completed by {view.completed_by!r} at {at}"
        )
    if view.state == EXPIRED:
        at = _iso(view.deadline_at_ms or 0)
        return TaskNotOpen(
            view.task_id, view.state, f"{what} is no longer open: its deadline passed at {at}"
        )
    return TaskNotOpen(
        view.task_id,
        view.state,
        f"{what} is no longer open: its step stopped waiting for it (the instance was "
        "cancelled, ended, reset or migrated, or the step was entered again)",
    )


def _human_of(ctx: OpsContext, conn: Connection, view: TaskView) -> HumanTask | None:
    """The descriptor of the task's step, in the version the task was written for."""
    node = ctx.graph_of(conn, view.version).nodes.get(view.node_id)
    return node.human if isinstance(node, Await) else None


def _check_person(
    act: _Acting, ctx: OpsContext, person: str, groups: Sequence[str], admin: bool
) -> None:
    view = act.view
    if admin:
        return
    if person in view.excluded:
        human = _human_of(ctx, act.tx.conn, view)
        starter = human is not None and "starter" in human.exclude
        why = (
            "they started the instance"
            if starter and person == act.inst.started_by
            else "they answered the instance's previous human task"
        )
        raise PermissionDenied(
            f"{person!r} may not act on human task {view.task_id!r}: excluded from it "
            f"(four eyes: {why})"
        )
    if not eligible(view, person, groups):
        raise PermissionDenied(
            f"{person!r} may not act on human task {view.task_id!r}: it is for " + _for_whom(view)
        )


def _for_whom(view: TaskView) -> str:
    parts = []
    if view.assignee:
        parts.append(f"assignee {view.assignee!r}")
    if view.candidate_people:
        parts.append("people " + ", ".join(repr(p) for p in view.candidate_people))
    if view.candidate_groups:
        parts.append("members of " + ", ".join(repr(g) for g in view.candidate_groups))
    return "; ".join(parts) or "nobody named (an admin must act on it)"


@dataclass
class _Acting:
    """An action in progress: the locked instance and the task read under its lock."""

    tx: Tx
    inst: Inst
    row: Any
    view: TaskView


def _begin(ctx: OpsContext, conn: Connection, task_id: str) -> _Acting:
    instance_id = task_row(conn, task_id).instance_id
    tx, inst = lock_instance(ctx, conn, instance_id)
    row = task_row(conn, task_id)  # again, now that no other action on the instance can run
    (view,) = views(conn, [row], tx.now)
    return _Acting(tx, inst, row, view)


def _replay(
    conn: Connection, act: _Acting, request_id: str | None, person: str
) -> TaskAnswer | None:
    """The answer recorded for `request_id` on this task, or None when it is new."""
    if not request_id:
        return None
    row = conn.execute(
        select(_a.c.actor, _a.c.detail).where(
            _a.c.task_id == act.view.task_id, _a.c.request_id == request_id
        )
    ).first()
    if row is None:
        return None
    if row.actor != person:
        raise InvalidRequest(
            f"request id {request_id!r} was used on human task {act.view.task_id!r} by "
            f"{row.actor!r}; a request id names one person's request"
        )
    detail = loads(row.detail)
    return TaskAnswer(act.view, completed=bool(detail.get("completed")), replayed=True)


def _act_on_open(
    ctx: OpsContext,
    conn: Connection,
    task_id: str,
    person: str,
    request_id: str | None,
    groups: Sequence[str],
    admin: bool,
) -> tuple[_Acting, TaskAnswer | None]:
    """The task read under its instance's lock, and the answer recorded for `request_id` when
    this request was seen before (a repeat is answered as the first time, open or not);
    TaskNotOpen when the request is new and the task is no longer open. First of all,
    PermissionDenied for a person the task is not for: no answer tells them anything of it
    (its state, who completed it, its content)."""
    act = _begin(ctx, conn, task_id)
    if not (admin or visible(act.view, person, groups) or eligible(act.view, person, groups)):
        # An excluded candidate passes here and is told why by _check_person.
        raise PermissionDenied(f"{person!r} may not act on human task {task_id!r}: not theirs")
    replayed = _replay(conn, act, request_id, person)
    if replayed is None and not act.view.open:
        raise _not_open(act.view)
    return act, replayed


def _record(
    act: _Acting,
    person: str,
    action: str,
    detail: Mapping[str, Json],
    request_id: str | None,
) -> None:
    conn = act.tx.conn
    seq = conn.execute(
        select(func.coalesce(func.max(_a.c.seq), 0)).where(_a.c.task_id == act.view.task_id)
    ).scalar_one()
    conn.execute(
        _a.insert().values(
            task_id=act.view.task_id,
            seq=int(seq) + 1,
            instance_id=act.view.instance_id,
            at_ms=act.tx.now,
            actor=person,
            action=action,
            detail=dumps(dict(detail)),
            request_id=request_id or None,
        )
    )


def _after(conn: Connection, act: _Acting) -> TaskView:
    (view,) = views(conn, [task_row(conn, act.view.task_id)], act.tx.now)
    return view


def claim(
    ctx: OpsContext,
    conn: Connection,
    task_id: str,
    person: str,
    groups: Sequence[str] = (),
    *,
    admin: bool = False,
    request_id: str | None = None,
) -> TaskAnswer:
    """`person` takes the task: until they unclaim it, no one else may answer it."""
    _need_person(person, "claiming")
    act, replayed = _act_on_open(ctx, conn, task_id, person, request_id, groups, admin)
    if replayed is not None:
        return replayed
    view = act.view
    _check_person(act, ctx, person, groups, admin)
    if view.approvals > 1:
        raise InvalidRequest(
            f"human task {task_id!r} needs {view.approvals} approvals: each person answers "
            "it without claiming it"
        )
    if view.state == CLAIMED:
        if view.claimed_by == person:
            return TaskAnswer(view)  # already theirs
        raise PermissionDenied(
            f"human task {task_id!r} is claimed by {view.claimed_by!r}; they (or an admin, "
            "by reassigning it) must release it first"
        )
    conn.execute(update(_h).where(_h.c.id == task_id).values(state=CLAIMED, claimed_by=person))
    _record(act, person, "claim", {}, request_id)
    act.tx.event(
        view.instance_id, "human_task_claimed", view.node_id, 0, task_id=task_id, by=person
    )
    act.tx.finish()
    return TaskAnswer(_after(conn, act))


def unclaim(
    ctx: OpsContext,
    conn: Connection,
    task_id: str,
    person: str,
    groups: Sequence[str] = (),
    *,
    admin: bool = False,
    request_id: str | None = None,
) -> TaskAnswer:
    """The person who claimed the task (or an admin) gives it back: OPEN again."""
    _need_person(person, "releasing")
    act, replayed = _act_on_open(ctx, conn, task_id, person, request_id, groups, admin)
    if replayed is not None:
        return replayed
    view = act.view
    if view.state != CLAIMED:
        return TaskAnswer(view)  # nothing to give back
    if view.claimed_by != person and not admin:
        raise PermissionDenied(
            f"human task {task_id!r} is claimed by {view.claimed_by!r}; only they or an admin "
            "may release it"
        )
    conn.execute(update(_h).where(_h.c.id == task_id).values(state=OPEN, claimed_by=None))
    _record(act, person, "unclaim", {"claimed_by": view.claimed_by}, request_id)
    act.tx.event(
        view.instance_id,
        "human_task_unclaimed",
        view.node_id,
        0,
        task_id=task_id,
        by=person,
        claimed_by=view.claimed_by,
    )
    act.tx.finish()
    return TaskAnswer(_after(conn, act))


def reassign(
    ctx: OpsContext,
    conn: Connection,
    task_id: str,
    to: str,
    by: str,
    *,
    admin: bool,
    request_id: str | None = None,
) -> TaskAnswer:
    """An admin makes `to` the task's assignee; a claim on it is released."""
    if not admin:
        raise PermissionDenied(f"only an admin may reassign human task {task_id!r}")
    _need_person(by, "reassigning")
    if not to:
        raise InvalidRequest("reassign needs the person the task goes to")
    act, replayed = _act_on_open(ctx, conn, task_id, by, request_id, (), admin)
    if replayed is not None:
        return replayed
    view = act.view
    conn.execute(
        update(_h).where(_h.c.id == task_id).values(assignee=to, state=OPEN, claimed_by=None)
    )
    detail = {"from": view.assignee, "to": to, "claimed_by": view.claimed_by}
    _record(act, by, "reassign", detail, request_id)
    act.tx.event(
        view.instance_id, "human_task_reassigned", view.node_id, 0, task_id=task_id, by=by, **detail
    )
    act.tx.finish()
    return TaskAnswer(_after(conn, act))


def check_answer(view: TaskView, answer: Json) -> None:
    """InputRejected unless `answer` satisfies the task's form (JSON Schema, draft 2020-12
    unless its `$schema` names another)."""
    import jsonschema  # type: ignore[import-untyped]

    form = view.form
    cls = jsonschema.validators.validator_for(form, default=jsonschema.Draft202012Validator)
    error = jsonschema.exceptions.best_match(cls(form).iter_errors(answer))
    if error is None:
        return
    where = "/" + "/".join(str(p) for p in error.absolute_path) if error.absolute_path else ""
    raise InputRejected(
        f"answer rejected by the form of human task {view.task_id!r} ({view.node_id!r})"
        f"{' at ' + where if where else ''}: {error.message}"
    )


def complete(
    ctx: OpsContext,
    conn: Connection,
    task_id: str,
    person: str,
    groups: Sequence[str],
    answer: Json,
    *,
    request_id: str | None = None,
    admin: bool = False,
) -> TaskAnswer:
    """`person` answers the task. With one approval needed the answer completes it; with N,
    each different person's answer is recorded and the N-th completes it. Completing hands
    the signal `task:<node>` to the task's token: the answer itself (N = 1), or the list of
    {"by", "answer", "at_ms"} in the order they came (N > 1)."""
    _need_person(person, "answering")
    act, replayed = _act_on_open(ctx, conn, task_id, person, request_id, groups, admin)
    if replayed is not None:
        return replayed
    view = act.view
    _check_person(act, ctx, person, groups, admin)
    if view.state == CLAIMED and view.claimed_by != person and not admin:
        raise PermissionDenied(
            f"{person!r} may not answer human task {task_id!r}: it is claimed by "
            f"{view.claimed_by!r}"
        )
    if any(a.by == person for a in view.approved):
        raise Conflict(
            f"{person!r} has already answered human task {task_id!r}; it needs "
            f"{view.approvals} different people"
        )
    check_answer(view, answer)
    approved = [*view.approved, Approval(person, answer, act.tx.now)]
    done = len(approved) >= view.approvals
    action = "complete" if done else "approve"
    _record(act, person, action, {"answer": answer, "completed": done}, request_id)
    if not done:
        act.tx.event(
            view.instance_id,
            "human_task_approved",
            view.node_id,
            0,
            task_id=task_id,
            by=person,
            answer=answer,
            approvals=len(approved),
            needed=view.approvals,
        )
        act.tx.finish()
        return TaskAnswer(_after(conn, act))
    payload: Json = answer if view.approvals == 1 else [a.as_json() for a in approved]
    conn.execute(
        update(_h)
        .where(_h.c.id == task_id)
        .values(
            state=COMPLETED,
            completed_by=person,
            completed_at_ms=act.tx.now,
            answer=dumps(payload),
            next_remind_at_ms=None,  # answered: no reminder is due any more
        )
    )
    act.tx.event(
        view.instance_id,
        "human_task_completed",
        view.node_id,
        0,
        task_id=task_id,
        by=person,
        answer=payload,
    )
    token_row = conn.execute(select(*TOKEN_COLUMNS).where(_t.c.id == view.token_id)).one()
    tok = act.tx.adopt(token_row)
    node = act.inst.graph.nodes[view.node_id]
    assert isinstance(node, Await)
    deliver_signal(ctx, act.tx, act.inst, node.signal, payload, (tok, node))
    act.tx.finish()
    return TaskAnswer(_after(conn, act), completed=True)


# -- reminders (the leader's) ---------------------------------------------------------------


def _reminded_people(view: TaskView) -> tuple[list[str], list[str]]:
    """Who a reminder is for: the person holding the task, else everyone it is for (the
    excluded left out), as (people, groups)."""
    if view.state == CLAIMED and view.claimed_by:
        return [view.claimed_by], []
    people: list[str] = []
    for name in (view.assignee, *view.candidate_people):
        if name and name not in people and name not in view.excluded:
            people.append(name)
    return people, list(view.candidate_groups)


def remind(ctx: OpsContext, conn: Connection, *, task_id: str, due: int) -> bool:
    """Record the task's reminder that fell due at `due`, exactly once: under the instance's
    lock, and only while the task's `next_remind_at_ms` is still `due` (a second server that
    found it due too finds it moved on). An open task gets the event `human_task_reminded` and
    its count; a task no longer open gets nothing, and its reminders due by now are dropped (a
    retry that reopens it later gets those still ahead). True: something was recorded."""
    found = conn.execute(select(_h.c.instance_id).where(_h.c.id == task_id)).first()
    if found is None:
        return False
    tx, _inst = lock_instance(ctx, conn, found.instance_id)
    row = task_row(conn, task_id)  # again, under the lock
    if row.next_remind_at_ms != due or due > tx.now:
        return False  # recorded by another server meanwhile, or not due
    (view,) = views(conn, [row], tx.now)
    human = _human_of(ctx, conn, view)
    times = reminder_times(
        human.remind_ms if human is not None else (), view.created_at_ms, view.deadline_at_ms
    )
    after = due if view.open else tx.now
    following = next((t for t in times if t > after), None)
    values: dict[str, Any] = {"next_remind_at_ms": following}
    if view.open:
        values.update(reminded_count=view.reminded_count + 1, last_reminded_at_ms=tx.now)
    done = conn.execute(
        update(_h).where(_h.c.id == task_id, _h.c.next_remind_at_ms == due).values(**values)
    )
    if done.rowcount != 1 or not view.open:
        return False
    people, groups = _reminded_people(view)
    tx.event(
        view.instance_id,
        "human_task_reminded",
        view.node_id,
        0,
        task_id=task_id,
        reminder=view.reminded_count + 1,
        reminders=len(times),
        due_at_ms=due,
        people=people,
        groups=groups,
    )
    tx.finish()
    return True
