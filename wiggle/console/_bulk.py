"""Bulk actions and batches: an action over every instance a filter matches, previewed (how many
per status, the first ids) and started only once the operator typed how many it will touch; then
the batch's progress, and every batch with pause, resume and cancel (docs/admin-api.md).

The preview is a GET (it changes nothing); starting is a POST with the CSRF token, which
previews again and refuses when the filter now matches another number than the one confirmed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import quote

import orjson
from starlette.datastructures import FormData, QueryParams
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from wiggle import errors
from wiggle.client import Batch, BulkPreview, Definition, describe_bulk_action
from wiggle.console import _security as sec
from wiggle.console._backend import STATUSES
from wiggle.console._forms import JsonInputError, parse_json_input
from wiggle.console._pages import Pages
from wiggle.console._targets import BulkResetNodes, bulk_reset_nodes
from wiggle.filters import parse_filter
from wiggle.graph import Graph

__all__ = [
    "ACTIONS",
    "BulkRequest",
    "bulk_request",
    "named_flow",
    "requested_by",
    "reset_nodes",
    "routes",
    "to_batch",
]

ACTIONS = ("retry", "cancel", "reset", "signal")
#: Batch states in which it still moves (or may again).
OPEN_STATES = ("RUNNING", "PAUSED")
NOTICES = {
    "paused": "Batch paused: no further instance is acted on until it is resumed.",
    "resumed": "Batch resumed.",
    "cancelled": "Batch cancelled: the instances it had not reached are left alone.",
    "started": "Batch started: the leading server works through it.",
}
_REFUSALS = (errors.InvalidRequest, errors.Conflict, errors.PermissionDenied)


@dataclass(frozen=True)
class BulkRequest:
    """A bulk form's action and parameters, as typed (text)."""

    action: str = "retry"
    node: str = ""
    signal: str = ""
    payload: str = ""
    reason: str = ""
    rate: str = ""

    def fields(self) -> dict[str, str]:
        return {k: v for k, v in asdict(self).items() if v}

    def params(self) -> dict[str, Any]:
        """The action's parameters for StartBulk (the request is checked: see bulk_request)."""
        if self.action == "reset":
            return {"node": self.node}
        if self.action == "signal":
            return {"name": self.signal, "payload": parse_json_input(self.payload, "the payload")}
        if self.action == "cancel" and self.reason:
            return {"reason": self.reason}
        return {}

    @property
    def rate_per_s(self) -> float:
        return float(self.rate) if self.rate else 0.0

    def describe(self) -> str:
        """The action in a few words: `reset to notify`, `signal approve`."""
        return describe_bulk_action(self.action, {"node": self.node, "name": self.signal})


def bulk_request(values: Mapping[str, Any]) -> tuple[BulkRequest, list[str]]:
    """The bulk action a form or query string asks for, and one message per unusable value."""

    def text(key: str, limit: int) -> str:
        return str(values.get(key, "") or "").strip()[:limit]

    req = BulkRequest(
        action=text("action", 20) or "retry",
        node=text("node", 200),
        signal=text("signal", 200),
        payload=str(values.get("payload", "") or "")[:100_000],
        reason=text("reason", 2000),
        rate=text("rate", 20),
    )
    problems: list[str] = []
    if req.action not in ACTIONS:
        problems.append(f"action {req.action!r} is not one of {', '.join(ACTIONS)}")
    if req.action == "reset" and not req.node:
        problems.append("a bulk reset needs the node to reset to")
    if req.action == "signal":
        if not req.signal:
            problems.append("a bulk signal needs the signal's name")
        try:
            parse_json_input(req.payload, "the payload")
        except JsonInputError as exc:
            problems.append(str(exc))
    try:
        rate = float(req.rate) if req.rate else 0.0
    except ValueError:
        rate = -1.0
    if not 0 <= rate <= 10_000:
        problems.append(f"per second {req.rate!r} is not a number from 0 to 10000")
    return req, problems


def requested_by(request: Request) -> str:
    """Who asked, as the batch keeps it when the console has no credential of its own."""
    origin: sec.RequestOrigin | None = request.scope.get("wiggle.origin")
    return f"console at {origin.client}" if origin is not None and origin.client else "console"


def to_batch(batch_id: str, notice: str = "started") -> Response:
    """To the batch's page, saying what was done."""
    return RedirectResponse(f"/batches/{quote(batch_id, safe='')}?notice={notice}", status_code=303)


def named_flow(where: list[str]) -> tuple[str, str] | None:
    """(flow, version or '') when the filter names exactly one flow (`flow=NAME`, and perhaps
    `version=V`), else None."""
    try:
        conditions = parse_filter(where)
    except errors.InvalidRequest:
        return None  # the preview says what is wrong with it
    flows = {c.value for c in conditions if c.field == "flow" and c.op == "="}
    versions = {c.value for c in conditions if c.field == "version" and c.op == "="}
    if len(flows) != 1 or len(versions) > 1:
        return None
    return flows.pop(), next(iter(versions), "")


async def reset_nodes(pages: Pages, where: list[str]) -> BulkResetNodes | None:
    """The nodes a bulk reset over `where` may name, when it names one flow (its version, or
    its newest): the form offers them instead of a free text field."""
    named = named_flow(where)
    if named is None:
        return None
    flow, version = named
    try:
        found: Definition = await pages.call(pages.backend.get_definition, flow, version)
    except (errors.NotFound, errors.InvalidRequest):
        return None  # no such flow (the preview matches nothing) or a version prefix
    return bulk_reset_nodes(flow, Graph.from_json(orjson.loads(found.canonical), found.version))


def _where(values: QueryParams | FormData) -> list[str]:
    return [str(w).strip()[:1000] for w in values.getlist("where") if str(w).strip()][:20]


def routes(pages: Pages) -> list[Route]:
    backend = pages.backend

    async def _preview_page(
        request: Request,
        where: list[str],
        req: BulkRequest,
        problems: list[str],
        status_code: int = 200,
        refused: str = "",
    ) -> Response:
        """The preview of `req` over `where`, or why there is none (`problems`: the request
        cannot be previewed); `refused`: why starting it was refused (the preview still shows)."""
        preview: BulkPreview | None = None
        choices = await reset_nodes(pages, where)
        if req.action == "reset" and req.node and choices is not None and not problems:
            problem = choices.problem(req.node)
            if problem:
                problems, status_code = [problem], 400
        if where and not problems:
            try:
                # With the action: the server refuses here what it would refuse at the start
                # (a reset node no matched version could take, when no one flow is named).
                preview = await pages.call(backend.preview_bulk, where, req.action, req.params())
            except _REFUSALS as exc:
                problems = [*problems, str(exc)]
                status_code = 400
        if not where:
            problems = [*problems, "give the filter: a bulk action over every instance is refused"]
            status_code = 400
        context = {
            "where": where,
            "bulk": req,
            "problems": [*problems, refused] if refused else problems,
            "preview": preview,
            "statuses": STATUSES,
            "reset_nodes": choices.nodes if choices is not None else [],
        }
        return pages.page(request, "bulk.html", context, status_code)

    async def preview(request: Request) -> Response:
        req, problems = bulk_request(request.query_params)
        where = _where(request.query_params)
        return await _preview_page(request, where, req, problems, 400 if problems else 200)

    async def start(request: Request) -> Response:
        form = await pages.checked_form(request)
        req, problems = bulk_request(form)
        where = _where(form)
        if req.action == "reset" and not problems:
            choices = await reset_nodes(pages, where)
            problem = choices.problem(req.node) if choices is not None else ""
            problems = [problem] if problem else problems
        if problems or not where:
            return await _preview_page(request, where, req, problems, 400)
        confirmed = str(form.get("matched", ""))
        typed = str(form.get("confirm_count", "")).strip().replace(",", "")
        if typed != confirmed:
            problem = f"type {confirmed} (the number of instances it matches) to start it"
            return await _preview_page(request, where, req, [], 400, problem)
        try:
            now: BulkPreview = await pages.call(backend.preview_bulk, where)
            if str(now.matched) != confirmed:
                problem = (
                    f"the filter now matches {now.matched} instances, not the {confirmed} you "
                    "confirmed: look again, and confirm the new number"
                )
                return await _preview_page(request, where, req, [], 409, problem)
            batch: Batch = await pages.call(
                backend.start_bulk,
                req.action,
                where,
                req.params(),
                req.rate_per_s,
                requested_by(request),
            )
        except _REFUSALS as exc:
            return await _preview_page(request, where, req, [], 409, str(exc))
        return to_batch(batch.batch_id)

    async def batches(request: Request) -> Response:
        found = await pages.call(backend.list_batches, 100, "")
        context = {"batches": found, "open_states": OPEN_STATES, "live_url": request.url.path}
        if pages.fragment(request):
            return pages.page(request, "_batches_live.html", context)
        return pages.page(request, "batches.html", context)

    async def batch(request: Request) -> Response:
        batch_id = request.path_params["batch_id"]
        found: Batch = await pages.call(backend.get_batch, batch_id)
        context = {
            "batch": found,
            "open_states": OPEN_STATES,
            "notice": NOTICES.get(request.query_params.get("notice", ""), ""),
            "live_url": request.url.path,
        }
        if pages.fragment(request):
            return pages.page(request, "_batch_live.html", context)
        return pages.page(request, "batch.html", context)

    async def update(request: Request) -> Response:
        batch_id = request.path_params["batch_id"]
        op = request.path_params["op"]
        await pages.checked_form(request)
        state, notice = {
            "pause": ("PAUSED", "paused"),
            "resume": ("RUNNING", "resumed"),
            "cancel": ("CANCELLED", "cancelled"),
        }.get(op, ("", ""))
        if not state:
            raise errors.NotFound(f"no batch action {op[:20]!r}")
        await pages.call(backend.update_batch, batch_id, state)
        return to_batch(batch_id, notice)

    return [
        Route("/bulk", pages.guarded(preview)),
        Route("/bulk/start", pages.guarded(start), methods=["POST"]),
        Route("/batches", pages.guarded(batches)),
        Route("/batches/{batch_id}", pages.guarded(batch)),
        Route("/batches/{batch_id}/{op}", pages.guarded(update), methods=["POST"]),
    ]
