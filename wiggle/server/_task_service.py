"""The human task methods of the WiggleAdmin service (docs/human-tasks.md, docs/admin-api.md):
who acts is the calling credential (its name is the person, its `groups` theirs; the `admin`
and `operator` scopes may act as an admin), or, on a server without credentials, what the
request says. Decode, call the engine, encode."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc

from wiggle._proto.wiggle.v1 import admin_pb2 as apb
from wiggle.engine import Engine
from wiggle.engine.reads.tasks import TaskAnswer, TaskView
from wiggle.errors import InvalidRequest, PermissionDenied
from wiggle.server._auth import CREDENTIAL
from wiggle.server._calls import CallTracker, rpc_handler
from wiggle.server._convert import decode_json, encode_json

__all__ = ["MAX_TASKS", "TaskMethods", "task_to_pb"]

#: ListHumanTasks answers at most this many tasks.
MAX_TASKS = 1000


def task_to_pb(v: TaskView) -> apb.HumanTask:
    return apb.HumanTask(
        task_id=v.task_id,
        instance_id=v.instance_id,
        node_id=v.node_id,
        flow=v.flow,
        version=v.version,
        title=v.title,
        instructions=v.instructions or "",
        form=encode_json(v.form),
        assignee=v.assignee or "",
        candidate_people=v.candidate_people,
        candidate_groups=v.candidate_groups,
        excluded=v.excluded,
        approvals=v.approvals,
        created_at_ms=v.created_at_ms,
        due_at_ms=v.due_at_ms or 0,
        deadline_at_ms=v.deadline_at_ms or 0,
        state=v.state,
        claimed_by=v.claimed_by or "",
        completed_by=v.completed_by or "",
        completed_at_ms=v.completed_at_ms or 0,
        answer=b"" if v.state != "COMPLETED" else encode_json(v.answer),
        approved=encode_json([a.as_json() for a in v.approved]),
        actions=[
            apb.HumanTaskAction(
                seq=a.seq,
                at_ms=a.at_ms,
                actor=a.actor,
                action=a.action,
                detail=encode_json(a.detail),
                request_id=a.request_id or "",
            )
            for a in v.actions
        ],
        reminded_count=v.reminded_count,
        last_reminded_at_ms=v.last_reminded_at_ms or 0,
        next_remind_at_ms=v.next_remind_at_ms or 0,
    )


def _answer_to_pb(a: TaskAnswer) -> apb.HumanTaskAnswer:
    return apb.HumanTaskAnswer(task=task_to_pb(a.task), completed=a.completed, replayed=a.replayed)


def actor_of(actor: apb.TaskActor) -> tuple[str, tuple[str, ...], bool]:
    """(person, groups, admin) of the call: the credential's, checked against what the request
    says; on a server without credentials, the request's."""
    cred = CREDENTIAL.get()
    if cred is None:
        return actor.person, tuple(actor.groups), actor.admin
    holder = f"credential {cred.name!r}"
    if actor.person and actor.person != cred.name:
        raise PermissionDenied(f"{holder} acts on human tasks as itself, not as {actor.person!r}")
    others = sorted(set(actor.groups) - set(cred.groups))
    if others:
        raise PermissionDenied(f"{holder} is not a member of group {others[0]!r}")
    may_admin = cred.scopes.admin or cred.scopes.operator
    if actor.admin and not may_admin:
        raise PermissionDenied(
            f"{holder} ({cred.scopes}) may not act on human tasks as an admin (that takes the "
            "admin or operator scope)"
        )
    return cred.name, cred.groups, actor.admin and may_admin


class TaskMethods:
    """Mixed into AdminService: it provides `_engine`, `_limit` and `calls`."""

    _engine: Engine
    _limit: int
    calls: CallTracker

    @rpc_handler
    def ListHumanTasks(
        self, request: apb.ListHumanTasksRequest, context: grpc.ServicerContext
    ) -> apb.ListHumanTasksResponse:
        person, groups, admin = actor_of(request.actor)
        states: Sequence[str] = (
            () if request.all_states else (list(request.states) or ("OPEN", "CLAIMED"))
        )
        limit = min(request.limit, MAX_TASKS) if request.limit > 0 else 100
        found = self._engine.list_tasks(
            person,
            groups,
            admin=admin,
            states=states,
            instance_id=request.instance_id or None,
            limit=limit,
        )
        return apb.ListHumanTasksResponse(tasks=[task_to_pb(v) for v in found])

    @rpc_handler
    def GetHumanTask(
        self, request: apb.HumanTaskRequest, context: grpc.ServicerContext
    ) -> apb.HumanTask:
        person, groups, admin = _acting_on_task(request)
        return task_to_pb(self._engine.show_task(request.task_id, person, groups, admin=admin))

    @rpc_handler
    def ClaimHumanTask(
        self, request: apb.HumanTaskRequest, context: grpc.ServicerContext
    ) -> apb.HumanTaskAnswer:
        person, groups, admin = _acting_on_task(request)
        got = self._engine.claim_task(
            request.task_id, person, groups, admin=admin, request_id=request.request_id or None
        )
        return _answer_to_pb(got)

    @rpc_handler
    def UnclaimHumanTask(
        self, request: apb.HumanTaskRequest, context: grpc.ServicerContext
    ) -> apb.HumanTaskAnswer:
        person, groups, admin = _acting_on_task(request)
        got = self._engine.unclaim_task(
            request.task_id, person, groups, admin=admin, request_id=request.request_id or None
        )
        return _answer_to_pb(got)

    @rpc_handler
    def ReassignHumanTask(
        self, request: apb.ReassignHumanTaskRequest, context: grpc.ServicerContext
    ) -> apb.HumanTaskAnswer:
        person, _groups, admin = _acting_on_task(request)
        got = self._engine.reassign_task(
            request.task_id,
            request.to,
            person,
            admin=admin,
            request_id=request.request_id or None,
        )
        return _answer_to_pb(got)

    @rpc_handler
    def CompleteHumanTask(
        self, request: apb.CompleteHumanTaskRequest, context: grpc.ServicerContext
    ) -> apb.HumanTaskAnswer:
        person, groups, admin = _acting_on_task(request)
        answer: Any = decode_json(request.answer, "the task's answer", self._limit)
        got = self._engine.complete_task(
            request.task_id,
            person,
            groups,
            answer,
            request_id=request.request_id or None,
            admin=admin,
        )
        return _answer_to_pb(got)


def _acting_on_task(request: Any) -> tuple[str, tuple[str, ...], bool]:
    """Who acts (`actor_of`) on the one task a request names (its id is needed)."""
    acting = actor_of(request.actor)
    if not request.task_id:
        raise InvalidRequest("a human task's id is needed")
    return acting
