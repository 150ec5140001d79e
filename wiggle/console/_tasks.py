"""The Tasks pages (docs/console.md#the-tasks-pages): the human tasks a person may act on, and
one task with its form, its audit trail and the context of its instance.

Every read and action is the engine's own (docs/human-tasks.md), made as the person logged in
(`_identity`): the server decides who may see and do what, and its refusals are shown as they
come. The answer is built here from the form's fields (`_taskform`) and checked by the engine
when the task is completed; a refusal is shown beside the form with what was typed kept. Each
drawing of an action's form carries a new request id, so a form sent twice (a double click, a
reload of the POST) is applied once.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlencode

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from wiggle import errors
from wiggle.client import HumanTask, Instance, TaskAnswer
from wiggle.console._backend import Unsupported
from wiggle.console._identity import Identity
from wiggle.console._pages import Pages, page_path
from wiggle.console._taskform import ANSWER, Field, answer_from, field_problems, form_fields

#: A page: what Starlette calls for a request.
Handler = Callable[[Request], Awaitable[Response]]

__all__ = ["SHOWS", "STATES", "TaskQuery", "may_act", "routes", "task_query"]

#: Whose tasks the list shows: the people and groups a task names, compared with the person's.
SHOWS = {
    "": "For me",  # every task the server lists for the person
    "mine": "Mine",  # named on it: assignee, candidate, claimed or answered it
    "groups": "My groups'",  # for a group the person is a member of
    "all": "All (admin)",  # every task, as an admin
}
#: The state filter, and the task states each one asks the server for (() is every state).
STATES: dict[str, tuple[str, ...]] = {
    "open": ("OPEN", "CLAIMED"),
    "completed": ("COMPLETED",),
    "expired": ("EXPIRED",),
    "cancelled": ("CANCELLED",),
    "any": (),
}
OPEN = ("OPEN", "CLAIMED")
_ADMIN_SCOPES = frozenset({"admin", "operator"})
NOT_YOURS = "It is not for you."

NOTICES = {
    "claimed": "You claimed this task: until you release it, only you (or an admin) can answer it.",
    "released": "You released this task: anyone it is for may take it again.",
    "completed": "Done: your answer completed this task, and the flow goes on with it.",
    "approved": (
        "Your answer is recorded. The task needs more people to answer before the flow goes on."
    ),
    "reassigned": "Task reassigned.",
}
REPLAYED = " (This form had been sent before: nothing was done twice.)"
#: The engine's refusal of an answer (docs/human-tasks.md#answering): where, and the message.
_REJECTED = re.compile(
    r"answer rejected by the form of human task '[^']*' \('[^']*'\)(?: at (\S+))?: (.*)", re.S
)


@dataclass(frozen=True)
class TaskQuery:
    show: str = ""
    state: str = "open"
    flow: str = ""
    instance: str = ""  # only the tasks of this instance

    def matches(self, task: HumanTask, who: Identity) -> bool:
        if self.flow and task.flow != self.flow:
            return False
        if self.show == "mine":
            return named(task, who.person)
        if self.show == "groups":
            return bool(set(task.candidate_groups) & set(who.groups))
        return True

    def query(self, **changes: str) -> str:
        values = {
            "show": self.show,
            "state": self.state,
            "flow": self.flow,
            "instance": self.instance,
            **changes,
        }
        return urlencode({k: v for k, v in values.items() if v and (k, v) != ("state", "open")})


def named(task: HumanTask, person: str) -> bool:
    """Whether the task names the person: its assignee, a candidate, who claimed, answered or
    completed it."""
    return (
        person in (task.assignee, task.claimed_by, task.completed_by)
        or person in task.candidate_people
        or any(a.get("by") == person for a in task.approved)
    )


def task_query(values: Mapping[str, str], who: Identity) -> tuple[TaskQuery, list[str]]:
    """The list's filters from its query string, and one message per value it cannot use."""
    problems = []
    default = "all" if who.task_admin else ""
    show = values.get("show", default)
    if show not in SHOWS or (show == "all" and not who.task_admin):
        problems.append(f"show {show[:40]!r} is not one of {', '.join(_shows(who)[1:])}")
        show = default
    state = values.get("state", "open") or "open"
    if state not in STATES:
        problems.append(f"state {state[:40]!r} is not one of {', '.join(STATES)}")
        state = "open"
    flow, instance = values.get("flow", "")[:200], values.get("instance", "")[:64]
    return TaskQuery(show, state, flow, instance), problems


def _shows(who: Identity) -> list[str]:
    return ["", "mine", "groups", *(["all"] if who.task_admin else [])]


def may_act(task: HumanTask, who: Identity) -> tuple[bool, str]:
    """Whether the person may answer the task now, and why not: the engine's rules
    (docs/human-tasks.md#who-may-act), read from the task as shown. The engine decides again
    when they act. An admin may answer any open task; when only that lets them (excluded, not
    for them, claimed by another), the reason says so."""
    if task.state not in OPEN:
        return False, ""
    if who.task_admin:
        # Said when a rule would stop them as a person (an exclusion, another's claim, their
        # own answer), not for a task that is merely not theirs: an admin's usual case.
        as_person, why = may_act(task, replace(who, scopes=who.scopes - _ADMIN_SCOPES))
        if as_person or why == NOT_YOURS:
            return True, ""
        return True, f"As a person you could not: {why} As an admin you may."
    if who.person in task.excluded:
        return False, (
            "You may not answer it: you are excluded from it (four eyes: you started this "
            "instance, or answered its previous task)."
        )
    if task.claimed_by and task.claimed_by != who.person:
        return False, f"{task.claimed_by} has claimed it: only they can answer it now."
    if any(a.get("by") == who.person for a in task.approved):
        more = task.approvals - len(task.approved)
        return False, f"You have answered it already; it waits for {more} more."
    if (
        who.person == task.assignee
        or who.person in task.candidate_people
        or set(task.candidate_groups) & set(who.groups)
    ):
        return True, ""
    return False, NOT_YOURS


def for_whom(task: HumanTask) -> list[str]:
    """Who the task is for, one entry per person or group."""
    people = [task.assignee] if task.assignee else []
    people += [p for p in task.candidate_people if p not in people]
    return people + [f"members of {g}" for g in task.candidate_groups]


def _sort_key(task: HumanTask) -> tuple[bool, int, int]:
    return (task.due_at_ms is None, task.due_at_ms or 0, task.created_at_ms)


def _to_task(task_id: str, done: str, replayed: bool = False) -> Response:
    query = {"done": done, **({"replayed": "1"} if replayed else {})}
    return RedirectResponse(f"{page_path('tasks', task_id)}?{urlencode(query)}", 303)


def _typed(form: FormData) -> dict[str, list[str]]:
    """What the form's answer fields carried, by field name."""
    return {
        key: [v for v in form.getlist(key) if isinstance(v, str)]
        for key in form
        if key == ANSWER or key.startswith(ANSWER + "/")
    }


def _request_id(form: FormData) -> str:
    value = form.get("request_id", "")
    return value[:64] if isinstance(value, str) else ""


def _where(view: Instance, task: HumanTask) -> list[str]:
    """Where the instance's live tokens are, as a sentence each: a human step's in words a
    person uses, the others as the server explains them."""
    out = []
    for t in view.tokens:
        if str(t.state) == "DONE":
            continue
        if str(t.state) == "AWAITING" and f"`task:{t.node_id}`" in t.explanation:
            this = " (this task)" if t.node_id == task.node_id and task.state in OPEN else ""
            out.append(f"{t.node_id}: waiting for people to answer its task{this}")
            continue
        why = f": {t.explanation}" if t.explanation else ""
        out.append(f"{t.node_id} ({str(t.state).lower()}){why}")
    return out


def routes(pages: Pages) -> list[Route]:
    backend = pages.backend
    pages.templates.env.filters["for_whom"] = lambda t: ", ".join(for_whom(t))

    def who_of(request: Request) -> Identity:
        who: Identity = request.scope["wiggle.identity"]
        return who

    async def tasks(request: Request) -> Response:
        who = who_of(request)
        query, problems = task_query(request.query_params, who)
        context: dict[str, Any] = {
            "query": query,
            "shows": [(s, SHOWS[s]) for s in _shows(who)],
            "states": list(STATES),
            "problems": problems,
            "rows": [],
            "flows": [],
            "unsupported": "",
            "live_url": request.url.path + (f"?{query.query()}" if query.query() else ""),
        }
        if not problems:
            try:
                found: list[HumanTask] = await pages.call(
                    backend.list_tasks,
                    who,
                    admin=query.show == "all",
                    states=STATES[query.state],
                    all_states=query.state == "any",
                    instance_id=query.instance,
                )
            except Unsupported as exc:
                context["unsupported"] = str(exc)
                found = []
            context["flows"] = sorted({t.flow for t in found} | ({query.flow} - {""}))
            context["rows"] = sorted((t for t in found if query.matches(t, who)), key=_sort_key)
        status = 400 if problems else 200
        if pages.fragment(request):
            return pages.page(request, "_tasks_live.html", context, status)
        return pages.page(request, "tasks.html", context, status)

    async def _instance(who: Identity, task: HumanTask) -> tuple[Instance | None, str]:
        """The task's instance (for its context), read as the person when they may read
        instances, else with the console's own credential; or why it cannot be shown."""
        read = backend.describe if who.reads_everything else backend.own_describe
        try:
            return await pages.call(read, task.instance_id), ""
        except errors.WiggleError as exc:
            return None, f"The instance cannot be shown: {exc}"

    async def _task_page(
        request: Request,
        task_id: str,
        *,
        status_code: int = 200,
        refusal: str = "",
        typed: Mapping[str, Sequence[str]] | None = None,
        problems: Mapping[str, list[str]] | None = None,
    ) -> Response:
        who = who_of(request)
        task: HumanTask = await pages.call(backend.get_task, who, task_id)
        view, unseen = await _instance(who, task)
        others: list[HumanTask] = []
        try:
            listed = await pages.call(backend.list_tasks, who, instance_id=task.instance_id)
            others = sorted((t for t in listed if t.task_id != task.task_id), key=_sort_key)
        except errors.WiggleError:
            pass  # the list of the instance's other tasks is a courtesy
        root: Field = form_fields(task.form, typed)
        for f in root.walk():
            f.problems = list((problems or {}).get(f.pointer, ()))
        allowed, why_not = may_act(task, who)
        done = request.query_params.get("done", "")
        notice = NOTICES.get(done, "")
        if notice and request.query_params.get("replayed"):
            notice += REPLAYED
        context = {
            "task": task,
            "who": who,
            "view": view,
            "unseen": unseen,
            "where": _where(view, task) if view is not None else [],
            "others": others,
            "for_whom": for_whom(task),
            "root": root,
            "has_required": any(f.required for f in root.walk() if f.pointer or f.widget == "json"),
            "may_act": allowed,
            "why_not": why_not,
            "notice": notice,
            "refusal": refusal,
            # what was typed, when no form is left to show it in (the task closed meanwhile)
            "unsent": answer_from(task.form, typed)[0] if typed and not allowed else None,
            "request_id": uuid.uuid4().hex,
            "live_url": page_path("tasks", task.task_id),
            "open": task.state in OPEN,
        }
        if pages.fragment(request):
            return pages.page(request, "_task_live.html", context, status_code)
        return pages.page(request, "task.html", context, status_code)

    async def task_page(request: Request) -> Response:
        return await _task_page(request, request.path_params["task_id"])

    def form_refusal(exc: errors.WiggleError) -> str:
        """The validator's own words, without the task's id: `'comment' is a required
        property`, `at /amount: 5 is less than the minimum of 10`."""
        found = _REJECTED.match(str(exc))
        if found is None:
            return str(exc)
        at, message = found.group(1), found.group(2)
        return f"{message} (at {at})" if at and at != "/" else message

    async def _act(
        request: Request, name: str, call: Any, *args: Any
    ) -> tuple[TaskAnswer | None, Response | None]:
        """Run an action; a refusal the person can act on is shown on the task's page."""
        task_id = request.path_params["task_id"]
        try:
            return await pages.call(call, *args), None
        except errors.PermissionDenied as exc:
            return None, await _task_page(request, task_id, status_code=403, refusal=f"{exc}")
        except (errors.Conflict, errors.InvalidRequest) as exc:
            message = f"{name} refused: {exc}"
            return None, await _task_page(request, task_id, status_code=409, refusal=message)

    def taking(name: str, method: str, done: str) -> Handler:
        """Claim or release (the backend's `method`): the person, the task and the form's
        request id, nothing else."""

        async def handler(request: Request) -> Response:
            who, task_id = who_of(request), request.path_params["task_id"]
            form = await pages.checked_form(request)
            call = getattr(backend, method)
            got, refused = await _act(request, name, call, who, task_id, _request_id(form))
            if refused is not None:
                return refused
            assert got is not None
            return _to_task(task_id, done, got.replayed)

        return handler

    claim = taking("Claim", "claim_task", "claimed")
    release = taking("Release", "unclaim_task", "released")

    async def reassign(request: Request) -> Response:
        who, task_id = who_of(request), request.path_params["task_id"]
        form = await pages.checked_form(request)
        to = str(form.get("to", "")).strip()[:200]
        if not to:
            return await _task_page(
                request, task_id, status_code=400, refusal="Reassign: name the person it goes to."
            )
        got, refused = await _act(
            request, "Reassign", backend.reassign_task, who, task_id, to, _request_id(form)
        )
        if refused is not None:
            return refused
        assert got is not None
        return _to_task(task_id, "reassigned", got.replayed)

    async def complete(request: Request) -> Response:
        who, task_id = who_of(request), request.path_params["task_id"]
        form = await pages.checked_form(request)
        typed = _typed(form)
        task: HumanTask = await pages.call(backend.get_task, who, task_id)
        answer, unreadable = answer_from(task.form, typed)
        if unreadable:
            message = "The answer was not sent: " + "; ".join(unreadable)
            return await _task_page(request, task_id, status_code=400, refusal=message, typed=typed)
        try:
            got: TaskAnswer = await pages.call(
                backend.complete_task, who, task_id, answer, _request_id(form)
            )
        except errors.InputRejected as exc:
            return await _task_page(
                request,
                task_id,
                status_code=400,
                refusal=form_refusal(exc),
                typed=typed,
                problems=field_problems(task.form, answer),
            )
        except errors.PermissionDenied as exc:
            return await _task_page(
                request, task_id, status_code=403, refusal=str(exc), typed=typed
            )
        except (errors.Conflict, errors.InvalidRequest) as exc:
            return await _task_page(
                request, task_id, status_code=409, refusal=str(exc), typed=typed
            )
        return _to_task(task_id, "completed" if got.completed else "approved", got.replayed)

    return [
        Route("/tasks", pages.guarded(tasks)),
        Route("/tasks/{task_id}", pages.guarded(task_page)),
        Route("/tasks/{task_id}/claim", pages.guarded(claim), methods=["POST"]),
        Route("/tasks/{task_id}/release", pages.guarded(release), methods=["POST"]),
        Route("/tasks/{task_id}/reassign", pages.guarded(reassign), methods=["POST"]),
        Route("/tasks/{task_id}/complete", pages.guarded(complete), methods=["POST"]),
    ]
