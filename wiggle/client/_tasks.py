"""The human task calls of `Client` (docs/human-tasks.md, docs/admin-api.md): list, show,
claim, unclaim, reassign and complete. On a server with credentials the caller is the
credential (its name is the person, its groups theirs); on one without, `person`, `groups` and
`admin` say who acts."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from wiggle._proto.wiggle.v1 import admin_pb2 as apb

__all__ = ["HumanTask", "HumanTaskAction", "TaskAnswer", "TaskCalls"]


@dataclass(frozen=True)
class HumanTaskAction:
    """A row of a task's audit trail."""

    seq: int
    at_ms: int
    actor: str
    action: str  # claim | unclaim | approve | complete | reassign
    detail: Any
    request_id: str | None


@dataclass(frozen=True)
class HumanTask:
    task_id: str
    instance_id: str
    node_id: str
    flow: str
    version: str
    title: str
    instructions: str | None
    form: Any
    assignee: str | None
    candidate_people: list[str]
    candidate_groups: list[str]
    excluded: list[str]
    approvals: int
    created_at_ms: int
    due_at_ms: int | None
    deadline_at_ms: int | None
    state: str  # OPEN | CLAIMED | COMPLETED | CANCELLED | EXPIRED
    claimed_by: str | None
    completed_by: str | None
    completed_at_ms: int | None
    answer: Any  # what the flow got (None until COMPLETED)
    approved: list[dict[str, Any]]  # the answers so far: {by, answer, at_ms}
    actions: list[HumanTaskAction] = field(default_factory=list)  # get_task only
    reminded_count: int = 0  # how many of its reminders were recorded
    last_reminded_at_ms: int | None = None
    next_remind_at_ms: int | None = None  # while open: when the next reminder falls due


@dataclass(frozen=True)
class TaskAnswer:
    task: HumanTask
    completed: bool  # complete_task: this answer completed the task
    replayed: bool  # the request id had been used: nothing was applied this time


def _json(raw: bytes) -> Any:
    return orjson.loads(raw) if raw else None


def task_from_pb(t: apb.HumanTask) -> HumanTask:
    return HumanTask(
        task_id=t.task_id,
        instance_id=t.instance_id,
        node_id=t.node_id,
        flow=t.flow,
        version=t.version,
        title=t.title,
        instructions=t.instructions or None,
        form=_json(t.form),
        assignee=t.assignee or None,
        candidate_people=list(t.candidate_people),
        candidate_groups=list(t.candidate_groups),
        excluded=list(t.excluded),
        approvals=t.approvals,
        created_at_ms=t.created_at_ms,
        due_at_ms=t.due_at_ms or None,
        deadline_at_ms=t.deadline_at_ms or None,
        state=t.state,
        claimed_by=t.claimed_by or None,
        completed_by=t.completed_by or None,
        completed_at_ms=t.completed_at_ms or None,
        answer=_json(t.answer),
        approved=_json(t.approved) or [],
        actions=[
            HumanTaskAction(
                a.seq, a.at_ms, a.actor, a.action, _json(a.detail), a.request_id or None
            )
            for a in t.actions
        ],
        reminded_count=t.reminded_count,
        last_reminded_at_ms=t.last_reminded_at_ms or None,
        next_remind_at_ms=t.next_remind_at_ms or None,
    )


def _answer(a: apb.HumanTaskAnswer) -> TaskAnswer:
    return TaskAnswer(task_from_pb(a.task), a.completed, a.replayed)


class TaskCalls:
    """Mixed into `Client`: it provides `_admin` (the WiggleAdmin stub) and `_call`."""

    _admin: Any
    _call: Callable[..., Any]

    @staticmethod
    def _actor(person: str, groups: Sequence[str], admin: bool) -> apb.TaskActor:
        return apb.TaskActor(person=person, groups=list(groups), admin=admin)

    def _act(self, method: Any, request: Any, request_id: str) -> TaskAnswer:
        # Retried only with a request id: the server answers a repeat as the first time.
        return _answer(self._call(method, request, idempotent=bool(request_id)))

    def list_tasks(
        self,
        *,
        states: Sequence[str] = (),
        all_states: bool = False,
        instance_id: str = "",
        limit: int = 0,
        person: str = "",
        groups: Sequence[str] = (),
        admin: bool = False,
    ) -> list[HumanTask]:
        """The tasks the caller may act on or acted on (`admin`: every task), soonest due
        first; OPEN and CLAIMED ones unless `states` (or `all_states`) says otherwise."""
        request = apb.ListHumanTasksRequest(
            actor=self._actor(person, groups, admin),
            states=list(states),
            instance_id=instance_id,
            limit=limit,
            all_states=all_states,
        )
        response = self._call(self._admin.ListHumanTasks, request, idempotent=True)
        return [task_from_pb(t) for t in response.tasks]

    def get_task(
        self, task_id: str, *, person: str = "", groups: Sequence[str] = (), admin: bool = False
    ) -> HumanTask:
        """One task with its audit trail."""
        request = apb.HumanTaskRequest(actor=self._actor(person, groups, admin), task_id=task_id)
        return task_from_pb(self._call(self._admin.GetHumanTask, request, idempotent=True))

    def claim_task(
        self,
        task_id: str,
        *,
        request_id: str = "",
        person: str = "",
        groups: Sequence[str] = (),
        admin: bool = False,
    ) -> TaskAnswer:
        request = apb.HumanTaskRequest(
            actor=self._actor(person, groups, admin), task_id=task_id, request_id=request_id
        )
        return self._act(self._admin.ClaimHumanTask, request, request_id)

    def unclaim_task(
        self,
        task_id: str,
        *,
        request_id: str = "",
        person: str = "",
        groups: Sequence[str] = (),
        admin: bool = False,
    ) -> TaskAnswer:
        request = apb.HumanTaskRequest(
            actor=self._actor(person, groups, admin), task_id=task_id, request_id=request_id
        )
        return self._act(self._admin.UnclaimHumanTask, request, request_id)

    def reassign_task(
        self,
        task_id: str,
        to: str,
        *,
        request_id: str = "",
        person: str = "",
        admin: bool = True,
    ) -> TaskAnswer:
        """An admin makes `to` the task's assignee."""
        request = apb.ReassignHumanTaskRequest(
            actor=self._actor(person, (), admin), task_id=task_id, to=to, request_id=request_id
        )
        return self._act(self._admin.ReassignHumanTask, request, request_id)

    def complete_task(
        self,
        task_id: str,
        answer: Any = None,
        *,
        request_id: str = "",
        person: str = "",
        groups: Sequence[str] = (),
        admin: bool = False,
    ) -> TaskAnswer:
        """Answer the task. With a `request_id` the call is retried while the server is
        unreachable, and a repeat applies nothing (`replayed`)."""
        request = apb.CompleteHumanTaskRequest(
            actor=self._actor(person, groups, admin),
            task_id=task_id,
            answer=orjson.dumps(answer),
            request_id=request_id,
        )
        return self._act(self._admin.CompleteHumanTask, request, request_id)
