"""The flow pages: every registered flow and version, and one version with its description, its
heat map (where its instances stand, where they failed) and a start form."""

from __future__ import annotations

import io
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from wiggle import errors
from wiggle.client import DefinitionSummary, NodeCount
from wiggle.console._backend import Unsupported
from wiggle.console._forms import JsonInputError, awaited_signals, parse_json_input, schema_problems
from wiggle.console._listing import list_query
from wiggle.console._pages import Pages, page_path
from wiggle.console._svg import diagram
from wiggle.console._text import pretty_json

__all__ = ["heat", "routes"]

#: An instance id typed into the start form: what the server accepts as one.
_MAX_ID = 64


def heat(counts: list[NodeCount]) -> dict[str, dict[str, int]]:
    """Node counts as the renderer's overlay: node -> state -> instances (LEASED drawn RUNNING,
    as on an instance's graph)."""
    out: dict[str, dict[str, int]] = {}
    for c in counts:
        state = "RUNNING" if c.state == "LEASED" else c.state
        per = out.setdefault(c.node_id, {})
        per[state] = per.get(state, 0) + c.instances
    return out


def _yaml(document: Any) -> str:
    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    out = io.StringIO()
    yaml.dump(document, out)
    return out.getvalue()


def routes(pages: Pages) -> list[Route]:
    backend = pages.backend

    async def _versions(name: str = "") -> tuple[list[DefinitionSummary], bool]:
        try:
            return await pages.call(backend.list_definitions, name), True
        except Unsupported:
            return [], False

    async def flows(request: Request) -> Response:
        versions, supported = await _versions()
        by_name: dict[str, list[DefinitionSummary]] = {}
        for v in versions:
            by_name.setdefault(v.name, []).append(v)
        if not supported:  # older server: the flows its newest instances ran
            query, _ = list_query({"page_size": "200"})
            result = await pages.call(backend.list_instances, query.filter(""))
            for row in result.rows:
                seen = by_name.setdefault(row.flow, [])
                version = next((v for v in seen if v.version == row.version), None)
                if version is None:
                    version = DefinitionSummary(row.flow, row.version, 0, "", {})
                    seen.append(version)
                counts = version.instance_counts
                counts[row.status] = counts.get(row.status, 0) + 1
        about = {name: pages.sources.about(name) for name in by_name}
        return pages.page(
            request,
            "flows.html",
            {"flows": dict(sorted(by_name.items())), "supported": supported, "about": about},
        )

    async def _flow_context(name: str, version: str) -> dict[str, Any]:
        definition = await pages.call(backend.get_definition, name, version)
        graph = orjson.loads(definition.canonical)
        versions, supported = await _versions(name)
        counts = await pages.call(backend.node_counts, name, definition.version)
        states = heat(counts)
        svg = await pages.call(diagram, definition.canonical, definition.version, states, "")
        about = pages.sources.about(name, definition.version)
        sample = "{}" if graph.get("input") else "null"
        if about is not None and about.has_sample:
            sample = pretty_json(about.sample)
        return {
            "definition": definition,
            "graph": graph,
            "svg": svg,
            "heat": sorted(states.items()),
            "versions": versions,
            "versions_supported": supported,
            "about": about,
            "source_json": pretty_json(graph),
            "source_yaml": _yaml(graph),
            "input_schema": pretty_json(graph.get("input")) if graph.get("input") else "",
            "signals": awaited_signals(graph),
            "input_text": sample,
            "instance_id": "",
            "problems": [],
        }

    async def flow(request: Request) -> Response:
        name = request.path_params["name"]
        context = await _flow_context(name, request.query_params.get("version", ""))
        return pages.page(request, "flow.html", context)

    async def start(request: Request) -> Response:
        name = request.path_params["name"]
        form = await pages.checked_form(request)
        version = str(form.get("version", ""))
        text = str(form.get("input", ""))
        instance_id = str(form.get("instance_id", "")).strip()
        context = await _flow_context(name, version)
        problems: list[str] = []
        if len(instance_id) > _MAX_ID:
            problems.append(f"the instance id is longer than {_MAX_ID} characters")
        try:
            value = parse_json_input(text, "the input")
            problems += schema_problems(context["graph"].get("input"), value)
        except JsonInputError as exc:
            problems.append(str(exc))
        if not problems:
            try:
                started = await pages.call(
                    backend.start, name, context["definition"].version, value, instance_id
                )
            except (errors.InputRejected, errors.InvalidRequest, errors.InstanceExists) as exc:
                problems.append(str(exc))
        if problems:
            context.update(problems=problems, input_text=text, instance_id=instance_id)
            return pages.page(request, "flow.html", context, 400)
        notice = "started" if started.created else "exists"
        return RedirectResponse(
            f"{page_path('instances', started.instance_id)}?notice={notice}", status_code=303
        )

    return [
        Route("/flows", pages.guarded(flows)),
        Route("/flows/{name}", pages.guarded(flow)),
        Route("/flows/{name}/start", pages.guarded(start), methods=["POST"]),
    ]
