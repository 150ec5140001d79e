"""A human task comes into being: the row written when a token parks at a human step's await
(docs/human-tasks.md). A leaf of the state machine (engine/machine/drive.py calls it inside the
transition that parks the token); the operations on a task live in engine/ops/tasks.py.

The values the flow computes (`{expr: ...}`) are evaluated here, once, against the token's
context; the people excluded (`exclude`) are decided here too, so that what a person may do with
the task does not change under them while it is open; and so are its reminders' times (the
leader records them, engine/ops/tasks.py `remind`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import func, select, update

from wiggle.expressions import EvaluationError, evaluate_value, failure_message
from wiggle.graph import Await, Computed, Text

from ..model.data import type_name
from ..model.types import TokenState
from ..store import schema as s
from .tx import Inst, Tok, Tx, dumps, new_id

__all__ = [
    "CLAIMED",
    "COMPLETED",
    "OPEN",
    "OPEN_STATES",
    "TaskValueError",
    "ensure_tasks",
    "last_actor",
    "open_task",
    "reminder_times",
]

_h = s.human_tasks

#: A task row's states as written. CLAIMED is OPEN with a person holding it.
OPEN = "OPEN"
CLAIMED = "CLAIMED"
COMPLETED = "COMPLETED"
OPEN_STATES = (OPEN, CLAIMED)


class TaskValueError(Exception):
    """A computed value of the task could not be had; the message says which and why."""


def _value(text: Text, ctx: Any, instance: dict[str, Any], what: str) -> Any:
    if isinstance(text, str):
        return text
    assert isinstance(text, Computed)
    try:
        return evaluate_value(text.expression, ctx, instance)
    except EvaluationError as exc:
        raise TaskValueError(f"its {what}: {failure_message(exc)}") from exc


def _string(text: Text, ctx: Any, instance: dict[str, Any], what: str) -> str:
    value = _value(text, ctx, instance, what)
    if not isinstance(value, str):
        raise TaskValueError(f"its {what} must be a string; the expression gave {type_name(value)}")
    return value


def _names(entries: tuple[Text, ...], ctx: Any, instance: dict[str, Any], what: str) -> list[str]:
    """The entries written out, and each computed one's string or list of strings, in order,
    each name once."""
    out: list[str] = []
    for entry in entries:
        value = _value(entry, ctx, instance, what)
        values = value if isinstance(value, list) else [value]
        for item in values:
            if not isinstance(item, str):
                raise TaskValueError(
                    f"its {what} must be strings or lists of strings; an expression gave "
                    f"{type_name(item)}"
                )
            if item and item not in out:
                out.append(item)
    return out


def last_actor(tx: Tx, instance_id: str) -> str | None:
    """Who completed the instance's most recently completed human task, if any."""
    row = tx.conn.execute(
        select(_h.c.completed_by)
        .where(_h.c.instance_id == instance_id, _h.c.state == COMPLETED)
        .order_by(_h.c.completed_at_ms.desc(), _h.c.token_seq.desc(), _h.c.id.desc())
        .limit(1)
    ).scalar()
    return None if row is None else str(row)


def reminder_times(
    remind_ms: Sequence[int], created_at_ms: int, deadline_at_ms: int | None
) -> list[int]:
    """When the task's reminders fall due, ascending: each `remind` duration after its
    creation, those before its deadline only (the compiler refuses others, but a task written
    for a migrated token keeps the deadline it had)."""
    times = sorted(created_at_ms + ms for ms in remind_ms)
    return [t for t in times if deadline_at_ms is None or t < deadline_at_ms]


def open_task(tx: Tx, inst: Inst, tok: Tok, node: Await) -> str:
    """Write the task of the human step `node` that `tok` just parked at (AWAITING, its
    deadline in `wake_at_ms`); returns the task id. TaskValueError: a computed value failed
    (the caller fails the instance, nothing written)."""
    human = node.human
    assert human is not None
    ctx = tok.context
    instance = {"id": inst.id, "flow": inst.flow}
    title = _string(human.title, ctx, instance, "title")
    instructions = (
        None
        if human.instructions is None
        else _string(human.instructions, ctx, instance, "instructions")
    )
    assignee = (
        None if human.assignee is None else _string(human.assignee, ctx, instance, "assignee")
    )
    people = _names(human.candidates.people, ctx, instance, "candidate people")
    groups = _names(human.candidates.groups, ctx, instance, "candidate groups")
    excluded: list[str] = []
    if "starter" in human.exclude and inst.started_by:
        # An instance no person started (a schedule's fire, a start on a server without
        # credentials) has no starter to exclude.
        excluded.append(inst.started_by)
    if "last_actor" in human.exclude:
        last = last_actor(tx, inst.id)
        if last is not None and last not in excluded:
            excluded.append(last)
    seq = tx.conn.execute(
        select(func.count()).select_from(_h).where(_h.c.token_id == tok.id)
    ).scalar_one()
    if seq:
        # The token's earlier tasks are closed now (this one is its newest): none of their
        # reminders is due any more.
        tx.conn.execute(
            update(_h)
            .where(_h.c.token_id == tok.id, s.REMINDED_TASKS)
            .values(next_remind_at_ms=None)
        )
    task_id = new_id()
    due = None if human.due_ms is None else tx.now + human.due_ms
    reminders = reminder_times(human.remind_ms, tx.now, tok.wake_at_ms)
    tx.conn.execute(
        _h.insert().values(
            id=task_id,
            instance_id=inst.id,
            token_id=tok.id,
            token_seq=int(seq) + 1,
            node_id=node.id,
            flow=inst.flow,
            version=inst.version,
            title=title,
            instructions=instructions,
            form=dumps(human.form),
            assignee=assignee,
            candidate_people=dumps(people),
            candidate_groups=dumps(groups),
            excluded=dumps(excluded),
            approvals=human.approvals,
            created_at_ms=tx.now,
            due_at_ms=due,
            deadline_at_ms=tok.wake_at_ms,
            state=OPEN,
            reminded_count=0,
            next_remind_at_ms=reminders[0] if reminders else None,
        )
    )
    # A reminder is the leader's to record: its ticker learns of it now, not at its next
    # routine wake-up.
    tx.wakeups.timer_armed |= bool(reminders)
    tx.event(
        inst.id,
        "human_task_created",
        node.id,
        0,
        task_id=task_id,
        title=title,
        assignee=assignee,
        candidate_people=people,
        candidate_groups=groups,
        excluded=excluded,
        approvals=human.approvals,
        due_at_ms=due,
        deadline_at_ms=tok.wake_at_ms,
        **({"reminders_at_ms": reminders} if reminders else {}),
        **tok.where,
    )
    return task_id


def ensure_tasks(tx: Tx, inst: Inst, tokens: list[Tok]) -> None:
    """After tokens were moved without being placed (a migration, its rollback): each token
    AWAITING at a human step whose newest task is not for that step gets one. A computed
    value that fails leaves the step without a task, said by a `human_task_not_created`
    event (an admin can reset or cancel the instance)."""
    for tok in tokens:
        if tok.state is not TokenState.AWAITING:
            continue
        node = inst.graph.nodes.get(tok.node_id)
        if not isinstance(node, Await) or node.human is None:
            continue
        newest = tx.conn.execute(
            select(_h.c.node_id)
            .where(_h.c.token_id == tok.id)
            .order_by(_h.c.token_seq.desc())
            .limit(1)
        ).scalar()
        if newest == tok.node_id:
            continue
        try:
            open_task(tx, inst, tok, node)
        except TaskValueError as exc:
            tx.event(inst.id, "human_task_not_created", node.id, 0, message=str(exc), **tok.where)
