"""The instance pages: the list (filters and the search box, counts, totals, paging both ways,
sorting) and one instance (its graph, why it waits, its step history and timeline, the schedule
that started it, its actions: signal, cancel, retry, reset to a node picked on the graph or from
a list)."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from wiggle import errors
from wiggle.client import Instance
from wiggle.console._backend import STATUSES, Unsupported
from wiggle.console._bulk import BulkRequest, reset_nodes
from wiggle.console._forms import JsonInputError, awaited_signals, parse_json_input
from wiggle.console._history import step_history
from wiggle.console._listing import (
    SORTS,
    ListQuery,
    failed_at,
    list_query,
    resolve_version,
    sort_rows,
)
from wiggle.console._pages import Pages, page_path
from wiggle.console._schedules import schedule_origin
from wiggle.console._svg import diagram
from wiggle.console._targets import reset_offer
from wiggle.graph import Graph
from wiggle.overlay import node_states

__all__ = ["routes"]

NOTICES = {
    "signal_delivered": "Signal delivered: an await took it.",
    "signal_buffered": "Signal sent: it is buffered until the instance reaches its await.",
    "cancelled": "Instance cancelled.",
    "started": "Instance started.",
    "exists": "An instance with that id already exists: here it is (nothing was started).",
    "retried": "Instance retried: it runs again from where it failed.",
    "reset": "Instance reset: it runs again from the node you chose.",
}

#: What a repair refused for a reason the operator can act on: shown on the instance page.
_REFUSALS = (errors.Conflict, errors.InvalidRequest, errors.PermissionDenied)


def _back(instance_id: str, notice: str) -> Response:
    """To the instance's page, saying what was done."""
    return RedirectResponse(
        f"{page_path('instances', instance_id)}?notice={notice}", status_code=303
    )


def _guess_current(view: Instance) -> str:
    """For servers that do not send `current_node`: the one live token's node, else the node
    of the last event."""
    live = {t.node_id for t in view.tokens if t.state != "DONE"}
    if len(live) == 1:
        return next(iter(live))
    for event in reversed(view.events):
        if event.node_id:
            return event.node_id
    return ""


def routes(pages: Pages) -> list[Route]:
    backend = pages.backend

    async def _resolved(query: ListQuery) -> tuple[str, str]:
        """The full version the list's version filter names, and a problem or ''."""
        if not query.version or resolve_version(query.version, [])[1] == "":
            return query.version, ""  # nothing to resolve: empty, or a whole version
        try:
            versions = await pages.call(backend.list_definitions, query.flow)
        except Unsupported:
            return "", "this server cannot list its versions: give the whole sha256:... version"
        return resolve_version(query.version, [v.version for v in versions])

    async def instances(request: Request) -> Response:
        query, problems = list_query(request.query_params)
        version, problem = await _resolved(query)
        if problem:
            problems.append(problem)
        context: dict[str, Any] = {
            "query": query,
            "form": query.form(),
            "problems": problems,
            "sorts": SORTS,
            "bulk": BulkRequest(),
            "live_url": request.url.path + (f"?{request.url.query}" if request.url.query else ""),
        }
        if problems:
            context.update(page_rows=[], counts=None, total=None, first=0, status_query={})
            if pages.fragment(request):
                return pages.page(request, "_instances_live.html", context, 400)
            return pages.page(request, "instances.html", context, 400)
        try:
            result = await pages.call(backend.list_instances, query.filter(version))
        except errors.InvalidRequest as exc:  # a search condition the server cannot use
            context.update(
                problems=[str(exc)], page_rows=[], counts=None, total=None, first=0, status_query={}
            )
            if pages.fragment(request):
                return pages.page(request, "_instances_live.html", context, 400)
            return pages.page(request, "instances.html", context, 400)
        counts = result.counts
        bulk_where, bulk_problem = query.bulk_conditions(version)
        choices = await reset_nodes(pages, bulk_where) if bulk_where else None
        total = None
        if counts is not None:
            total = counts.get(query.status, 0) if query.status else sum(counts.values())
        first = (query.page_number - 1) * query.page_size + 1
        context.update(
            page_rows=sort_rows(result.rows, query.sort, query.descending),
            counts=counts,
            total=total,
            first=first,
            next_query=query.next_query(result.next_page_token) if result.next_page_token else "",
            previous_query=query.previous_query(),
            first_query=query.query(),
            status_query={s: query.query(status=s) for s in STATUSES},
            all_query=query.query(status=""),
            search_names=sorted({name for r in result.rows for name in r.search}),
            bulk_where=bulk_where,
            bulk_problem=bulk_problem,
            reset_nodes=choices.nodes if choices is not None else [],
        )
        if pages.fragment(request):
            return pages.page(request, "_instances_live.html", context)
        return pages.page(request, "instances.html", context)

    async def _instance_context(request: Request, instance_id: str) -> dict[str, Any]:
        view: Instance = await pages.call(backend.describe, instance_id)
        definition = await pages.call(backend.get_definition, view.flow, view.version)
        graph = orjson.loads(definition.canonical)
        typed = Graph.from_json(graph, definition.version)
        states = node_states(typed, view.status, view.reason, view.tokens, view.events)
        if view.status.finished:
            current = failed_at(view)
        else:
            current = view.current_node or _guess_current(view)
        svg = await pages.call(diagram, definition.canonical, view.version, states, current)
        signals = awaited_signals(graph)
        waiting = [
            graph["nodes"][t.node_id].get("signal")
            for t in view.tokens
            if t.state == "AWAITING" and t.node_id in graph["nodes"]
        ]
        # A human step's signal (`task:NAME`) is answered through its task, never sent by hand.
        ordered = [
            s
            for s in dict.fromkeys([s for s in waiting if s] + signals)
            if not s.startswith("task:")
        ]
        ended = max((e.at_ms for e in view.events), default=view.updated_at_ms)
        offer = reset_offer(typed, view.status, view.parent_instance_id, view.step_inputs)
        return {
            "view": view,
            "svg": svg,
            "current": current,
            "states": states,
            "live_tokens": [t for t in view.tokens if t.state != "DONE"],
            "signals": ordered,
            "signal_of": {
                node_id: node["signal"]
                for node_id, node in graph["nodes"].items()
                if node.get("kind") == "await"
            },
            "steps": step_history(view.events),
            "offer": offer,
            "last_input": {
                node: entry for node, entry in view.step_inputs.items() if isinstance(entry, dict)
            },
            "ended_ms": ended if view.status.finished else 0,
            "notice": NOTICES.get(request.query_params.get("notice", ""), ""),
            "live_url": page_path("instances", instance_id),
        }

    async def _whole_page(
        request: Request, context: dict[str, Any], status_code: int = 200
    ) -> Response:
        """The instance's page with what its live part leaves out: the schedule that started
        it (read once: it never changes)."""
        view: Instance = context["view"]
        context["origin"] = await pages.call(schedule_origin, backend, view.instance_id, view.flow)
        return pages.page(request, "instance.html", context, status_code)

    async def instance(request: Request) -> Response:
        instance_id = request.path_params["instance_id"]
        context = await _instance_context(request, instance_id)
        if pages.fragment(request):
            return pages.page(request, "_instance_live.html", context)
        return await _whole_page(request, context)

    async def signal(request: Request) -> Response:
        instance_id = request.path_params["instance_id"]
        form = await pages.checked_form(request)
        name = str(form.get("name", "")).strip()
        payload_text = str(form.get("payload", ""))
        problem = ""
        payload: Any = None
        if not name:
            problem = "choose the signal to send"
        else:
            try:
                payload = parse_json_input(payload_text, "the payload")
            except JsonInputError as exc:
                problem = str(exc)
        if problem:
            context = await _instance_context(request, instance_id)
            context.update(signal_error=problem, signal_name=name, payload_text=payload_text)
            return await _whole_page(request, context, 400)
        if form.get("confirm") != "yes":
            return pages.page(
                request,
                "confirm.html",
                {
                    "instance_id": instance_id,
                    "action": "signal",
                    "fields": {"name": name, "payload": payload_text},
                    "payload": payload,
                    "name": name,
                },
            )
        delivered = await pages.call(backend.signal, instance_id, name, payload)
        notice = "signal_delivered" if delivered else "signal_buffered"
        return _back(instance_id, notice)

    async def cancel(request: Request) -> Response:
        instance_id = request.path_params["instance_id"]
        form = await pages.checked_form(request)
        reason = str(form.get("reason", "")).strip()[:2000]
        if form.get("confirm") != "yes":
            return pages.page(
                request,
                "confirm.html",
                {"instance_id": instance_id, "action": "cancel", "fields": {"reason": reason}},
            )
        await pages.call(backend.cancel, instance_id, reason)
        return _back(instance_id, "cancelled")

    async def _refused(request: Request, instance_id: str, problem: str) -> Response:
        context = await _instance_context(request, instance_id)
        context["action_error"] = problem
        return await _whole_page(request, context, 409)

    async def retry(request: Request) -> Response:
        instance_id = request.path_params["instance_id"]
        form = await pages.checked_form(request)
        if form.get("confirm") != "yes":
            view: Instance = await pages.call(backend.describe, instance_id)
            return pages.page(
                request,
                "confirm.html",
                {"instance_id": instance_id, "action": "retry", "fields": {}, "view": view},
            )
        try:
            await pages.call(backend.retry, instance_id)
        except _REFUSALS as exc:
            return await _refused(request, instance_id, f"Retry refused: {exc}")
        return _back(instance_id, "retried")

    async def reset(request: Request) -> Response:
        instance_id = request.path_params["instance_id"]
        form = await pages.checked_form(request)
        node = str(form.get("node", "")).strip()[:200]
        if not node:
            return await _refused(request, instance_id, "Choose the node to reset to.")
        if form.get("confirm") != "yes":
            context = await _instance_context(request, instance_id)
            target = context["offer"].target(node)
            if target is None:
                why = context["offer"].why_not.get(node) or context["offer"].refused
                why = why or f"the flow has no node {node!r}"
                return await _refused(request, instance_id, f"Cannot reset to {node}: {why}.")
            return pages.page(
                request,
                "confirm.html",
                {
                    "instance_id": instance_id,
                    "action": "reset",
                    "fields": {"node": node},
                    "view": context["view"],
                    "target": target,
                },
            )
        try:
            await pages.call(backend.reset, instance_id, node)
        except _REFUSALS as exc:
            return await _refused(request, instance_id, f"Reset refused: {exc}")
        return _back(instance_id, "reset")

    return [
        Route("/instances", pages.guarded(instances)),
        Route("/instances/{instance_id}", pages.guarded(instance)),
        Route("/instances/{instance_id}/signal", pages.guarded(signal), methods=["POST"]),
        Route("/instances/{instance_id}/cancel", pages.guarded(cancel), methods=["POST"]),
        Route("/instances/{instance_id}/retry", pages.guarded(retry), methods=["POST"]),
        Route("/instances/{instance_id}/reset", pages.guarded(reset), methods=["POST"]),
    ]
