"""Migration pages (docs/migration.md): choose a flow's live versions and a target, get the plan
from the server, review it (the diff picture, counts per outcome, blocked instances with their
reasons), apply it (all, or a canary of N) after typing how many instances it moves, follow the
batch, and roll a migration back.

A plan is a document the server made and hashed; the console keeps the plans it was given in
memory (the newest PLANS_KEPT, by hash) so the review page can be reloaded and a canary followed
by the rest, and hands the very document back to apply. A restarted console has forgotten them:
plan again (the server refuses a stale plan anyway).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

import orjson
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from wiggle import errors
from wiggle.client import Batch, DefinitionSummary
from wiggle.console._backend import Unsupported
from wiggle.console._bulk import requested_by, to_batch
from wiggle.console._forms import JsonInputError
from wiggle.console._listing import split_conditions
from wiggle.console._pages import Pages
from wiggle.console._svg import diagram
from wiggle.graph import Graph
from wiggle.migration import diff_graphs

__all__ = ["PLANS_KEPT", "PlanStore", "parse_map", "routes"]

PLANS_KEPT = 20
#: Blocked and migrating instances listed on the review page (the counts cover all of them).
SHOWN = 200
_REFUSALS = (errors.InvalidRequest, errors.Conflict, errors.PermissionDenied, errors.NotFound)


class PlanStore:
    """The plans this console was given, newest last, at most `size`."""

    def __init__(self, size: int = PLANS_KEPT) -> None:
        self.size = size
        self._plans: OrderedDict[str, dict[str, Any]] = OrderedDict()

    def add(self, plan: dict[str, Any]) -> str:
        key = str(plan["hash"]).removeprefix("sha256:")[:64]
        self._plans[key] = plan
        self._plans.move_to_end(key)
        while len(self._plans) > self.size:
            self._plans.popitem(last=False)
        return key

    def get(self, key: str) -> dict[str, Any] | None:
        return self._plans.get(key)


def parse_map(text: str) -> tuple[dict[str, str], list[str]]:
    """`OLD=NEW` pairs, one a line or separated by commas, and a message per bad one."""
    mapping: dict[str, str] = {}
    problems: list[str] = []
    for item in text.replace(",", "\n").splitlines():
        item = item.strip()
        if not item:
            continue
        old, sep, new = item.partition("=")
        if not sep or not old.strip() or not new.strip():
            problems.append(f"node map {item[:80]!r}: write OLD=NEW (node ids)")
            continue
        mapping[old.strip()] = new.strip()
    return mapping, problems


def _live(versions: list[DefinitionSummary]) -> list[DefinitionSummary]:
    return [v for v in versions if v.instance_counts.get("RUNNING")]


def routes(pages: Pages) -> list[Route]:
    backend = pages.backend
    plans = PlanStore()

    async def _form_page(
        request: Request, values: Mapping[str, Any], problems: list[str], status_code: int = 200
    ) -> Response:
        flow = str(values.get("flow", "")).strip()[:200]
        try:
            versions: list[DefinitionSummary] = await pages.call(backend.list_definitions, "")
        except Unsupported:
            versions = []
        names = sorted({v.name for v in versions})
        mine = [v for v in versions if v.name == flow]
        try:
            found = await pages.call(backend.list_batches, 20, "migrate")
            found += await pages.call(backend.list_batches, 20, "rollback")
        except _REFUSALS:
            found = []
        context = {
            "flow": flow,
            "names": names,
            "versions": mine,
            "live": {v.version for v in _live(mine)},
            "values": values,
            "chosen_from": set(values.getlist("from")) if hasattr(values, "getlist") else set(),
            "problems": problems,
            "batches": sorted(found, key=lambda b: b.created_at_ms, reverse=True),
        }
        return pages.page(request, "migrations.html", context, status_code)

    async def start(request: Request) -> Response:
        return await _form_page(request, request.query_params, [])

    async def plan(request: Request) -> Response:
        form = await pages.checked_form(request)
        flow = str(form.get("flow", "")).strip()[:200]
        to = str(form.get("to", "")).strip()[:80] or "latest"
        froms = [str(v)[:80] for v in form.getlist("from") if str(v).strip()][:50]
        mapping, problems = parse_map(str(form.get("map", ""))[:20_000])
        try:
            where = split_conditions(str(form.get("where", ""))[:4000])
        except JsonInputError as exc:
            where, problems = [], [*problems, str(exc)]
        timers = str(form.get("timers", "keep"))
        if timers not in ("keep", "restart"):
            problems.append(f"timers {timers[:20]!r} is keep or restart")
        if not flow:
            problems.append("choose the flow")
        if problems:
            return await _form_page(request, form, problems, 400)
        try:
            doc: dict[str, Any] = await pages.call(
                backend.plan_migration,
                flow,
                to,
                from_versions=froms,
                where=where,
                mapping=mapping,
                timers=timers,
                children=form.get("children") == "on",
            )
        except _REFUSALS as exc:
            return await _form_page(request, form, [str(exc)], 400)
        key = plans.add(doc)
        return RedirectResponse(f"/migrations/plans/{key}", status_code=303)

    async def _review(
        request: Request, key: str, problems: list[str], status_code: int = 200
    ) -> Response:
        doc = plans.get(key)
        if doc is None:
            return pages.page(
                request,
                "error.html",
                {
                    "message": f"This console does not hold plan {key[:20]} (it keeps the last "
                    f"{PLANS_KEPT} plans it made, until it restarts): make the plan again."
                },
                404,
            )
        old_version = request.query_params.get("from", "") or (doc["from"] or [doc["to"]])[0]
        if old_version not in doc["from"]:
            old_version = (doc["from"] or [doc["to"]])[0]
        new_def = await pages.call(backend.get_definition, doc["flow"], doc["to"])
        old_def = await pages.call(backend.get_definition, doc["flow"], old_version)
        new = Graph.from_json(orjson.loads(new_def.canonical), new_def.version)
        old = Graph.from_json(orjson.loads(old_def.canonical), old_def.version)
        found = diff_graphs(old, new)
        svg = await pages.call(
            diagram, new_def.canonical, new_def.version, found.marks(), "", found.caption()
        )
        entries = doc["instances"]
        context = {
            "plan": doc,
            "key": key,
            "svg": svg,
            "diff": found,
            "old_version": old_version,
            "from_links": {v: urlencode({"from": v}) for v in doc["from"]},
            "summary": doc["summary"],
            "blocked": [e for e in entries if e["outcome"] == "blocked"][:SHOWN],
            "moving": [e for e in entries if e["outcome"] == "migrate"][:SHOWN],
            "problems": problems,
            "canary": str(request.query_params.get("canary", "")),
        }
        return pages.page(request, "migration_plan.html", context, status_code)

    async def review(request: Request) -> Response:
        return await _review(request, request.path_params["key"], [])

    async def apply(request: Request) -> Response:
        key = request.path_params["key"]
        form = await pages.checked_form(request)
        doc = plans.get(key)
        if doc is None:
            return await _review(request, key, [])
        moving = int(doc["summary"]["migrate"])
        scope = str(form.get("scope", "all"))
        limit_text = str(form.get("limit", "")).strip()
        limit = 0
        if scope == "canary":
            limit = int(limit_text) if limit_text.isdigit() else 0
            if not 1 <= limit <= moving:
                problem = f"a canary is a number of instances from 1 to {moving}"
                return await _review(request, key, [problem], 400)
        expected = str(limit or moving)
        typed = str(form.get("confirm_count", "")).strip().replace(",", "")
        if typed != expected:
            problem = f"type {expected} (the instances this applies to) to apply the plan"
            return await _review(request, key, [problem], 400)
        try:
            batch: Batch = await pages.call(
                backend.apply_migration,
                doc,
                limit=limit,
                rate_per_s=0.0,
                requested_by=requested_by(request),
            )
        except _REFUSALS as exc:
            return await _review(request, key, [str(exc)], 409)
        return to_batch(batch.batch_id)

    async def rollback(request: Request) -> Response:
        batch_id = request.path_params["batch_id"]
        form = await pages.checked_form(request)
        found: Batch = await pages.call(backend.get_batch, batch_id)
        if form.get("confirm") != "yes":
            return pages.page(request, "rollback_confirm.html", {"batch": found})
        try:
            started: Batch = await pages.call(
                backend.rollback_migration, batch_id, requested_by=requested_by(request)
            )
        except _REFUSALS as exc:
            return pages.page(
                request, "rollback_confirm.html", {"batch": found, "problem": str(exc)}, 409
            )
        return to_batch(started.batch_id)

    return [
        Route("/migrations", pages.guarded(start)),
        Route("/migrations/plan", pages.guarded(plan), methods=["POST"]),
        Route("/migrations/plans/{key}", pages.guarded(review)),
        Route("/migrations/plans/{key}/apply", pages.guarded(apply), methods=["POST"]),
        Route("/migrations/batches/{batch_id}/rollback", pages.guarded(rollback), methods=["POST"]),
    ]
