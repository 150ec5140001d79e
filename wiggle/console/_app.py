"""The console's pages: a Starlette app over a `Backend`, rendered with Jinja2 templates.

Pages are server-rendered HTML; the one script (static/console.js) refreshes the live part of
a page by fetching the same URL with `X-Wiggle-Fragment: 1`, which answers that part alone.
Actions (start, signal, cancel) are POSTs with a CSRF token; signal and cancel first answer a
confirmation page, and only its second POST (`confirm=yes`) acts.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import orjson
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from wiggle import errors
from wiggle.console import _security as sec
from wiggle.console._backend import (
    STATUSES,
    Backend,
    FlowVersion,
    InstanceDetail,
    Unsupported,
)
from wiggle.console._svg import diagram
from wiggle.console._views import (
    JsonInputError,
    awaited_signals,
    filter_from_query,
    filter_query,
    form_values,
    format_ms,
    parse_json_input,
    pretty_json,
    schema_problems,
    short_version,
)
from wiggle.graph import Graph
from wiggle.overlay import node_states

__all__ = ["ConsoleSettings", "create_app"]

_HERE = Path(__file__).parent
_FRAGMENT_HEADER = "x-wiggle-fragment"
_OPEN_PATHS = ("/login", "/static/")

NOTICES = {
    "signal_delivered": "Signal delivered: an await took it.",
    "signal_buffered": "Signal sent: it is buffered until the instance reaches its await.",
    "cancelled": "Instance cancelled.",
    "started": "Instance started.",
}


@dataclass(frozen=True)
class ConsoleSettings:
    """How the app guards itself (the bind address decides the defaults, see `wiggle console`).

    `require_login`: every page needs a session opened with `token`. `loopback_only`: answer
    only to loopback Host names. `secure_cookies`: mark cookies Secure (served over TLS).
    """

    token: str | None = None
    require_login: bool = False
    loopback_only: bool = True
    secure_cookies: bool = False
    refresh_ms: int = 2000

    def __post_init__(self) -> None:
        if self.require_login and not self.token:
            raise ValueError("a console that requires a login needs the token to check it against")


class _Guard(BaseHTTPMiddleware):
    def __init__(self, app: Any, settings: ConsoleSettings, sessions: sec.Sessions) -> None:
        super().__init__(app)
        self.settings = settings
        self.sessions = sessions

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        response = await self._guarded(request, call_next)
        response.headers.update(sec.security_headers())
        return response

    async def _guarded(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        host = request.headers.get("host", "")
        if not sec.host_allowed(host, loopback_only=self.settings.loopback_only):
            return PlainTextResponse("unexpected Host header", status_code=400)
        csrf = request.cookies.get(sec.CSRF_COOKIE) or ""
        fresh = len(csrf) < 32
        if fresh:
            csrf = sec.new_secret()
        request.scope["wiggle.csrf"] = csrf
        path = request.url.path
        if (
            self.settings.require_login
            and not path.startswith(_OPEN_PATHS)
            and not self.sessions.valid(request.cookies.get(sec.SESSION_COOKIE))
        ):
            if request.method == "GET" and _FRAGMENT_HEADER not in request.headers:
                target = "/login?" + urlencode({"next": request.url.path})
                response: Response = RedirectResponse(target, status_code=303)
            else:
                response = PlainTextResponse("log in first", status_code=401)
        else:
            response = await call_next(request)
        if fresh:
            response.set_cookie(
                sec.CSRF_COOKIE,
                csrf,
                httponly=True,
                samesite="strict",
                secure=self.settings.secure_cookies,
            )
        return response


def _status_of(exc: errors.WiggleError) -> int:
    if isinstance(exc, errors.NotFound):
        return 404
    if isinstance(exc, errors.InvalidRequest | errors.Conflict):
        return 400
    if isinstance(exc, errors.Unavailable):
        return 503
    return 502


def create_app(backend: Backend, settings: ConsoleSettings | None = None) -> Starlette:
    """The console as an ASGI app talking to the server behind `backend`."""
    settings = settings or ConsoleSettings()
    sessions = sec.Sessions.for_token(settings.token)
    templates = Jinja2Templates(directory=str(_HERE / "templates"))
    env = templates.env
    env.filters["ms"] = format_ms
    env.filters["short"] = short_version
    env.filters["pretty"] = pretty_json
    env.filters["compact"] = lambda v: orjson.dumps(v).decode()
    env.filters["path"] = lambda v: quote(str(v), safe="")
    env.globals["STATUSES"] = STATUSES
    env.globals["refresh_ms"] = settings.refresh_ms
    env.globals["login_required"] = settings.require_login

    def page(
        request: Request, name: str, context: dict[str, Any], status_code: int = 200
    ) -> Response:
        context = {
            "csrf": request.scope.get("wiggle.csrf", ""),
            "path": request.url.path,
            **context,
        }
        return templates.TemplateResponse(request, name, context, status_code=status_code)

    def fragment(request: Request) -> bool:
        return _FRAGMENT_HEADER in request.headers

    def failure(request: Request, exc: errors.WiggleError) -> Response:
        return page(request, "error.html", {"message": str(exc)}, _status_of(exc))

    async def call(fn: Callable[..., Any], *args: Any) -> Any:
        return await run_in_threadpool(fn, *args)

    async def checked_form(request: Request) -> FormData:
        form = await request.form()
        sec.check_csrf(request, form)
        return form

    def guarded(
        handler: Callable[[Request], Awaitable[Response]],
    ) -> Callable[[Request], Awaitable[Response]]:
        async def run(request: Request) -> Response:
            try:
                return await handler(request)
            except sec.CsrfError as exc:
                return page(request, "error.html", {"message": str(exc)}, 403)
            except errors.WiggleError as exc:
                return failure(request, exc)

        return run

    # -- instances ---------------------------------------------------------------------------

    async def home(request: Request) -> Response:
        return RedirectResponse("/instances", status_code=303)

    async def instances(request: Request) -> Response:
        query = filter_from_query(request.query_params)
        result = await call(backend.list_instances, query)
        context = {
            "query": query,
            "form": form_values(query),
            "page_rows": result.rows,
            "counts": result.counts,
            "next_query": filter_query(query, page=result.next_page_token)
            if result.next_page_token
            else "",
            "first_query": filter_query(query),
            "status_query": {s: filter_query(query, status=s) for s in STATUSES},
            "all_query": filter_query(query, status=""),
            "live_url": request.url.path + (f"?{request.url.query}" if request.url.query else ""),
        }
        if fragment(request):
            return page(request, "_instances_live.html", context)
        return page(request, "instances.html", context)

    async def _instance_context(request: Request, instance_id: str) -> dict[str, Any]:
        view: InstanceDetail = await call(backend.describe, instance_id)
        definition = await call(backend.get_definition, view.flow, view.version)
        graph = orjson.loads(definition.canonical)
        typed = Graph.from_json(graph, definition.version)
        states = node_states(typed, view.status, view.reason, view.tokens, view.events)
        current = view.current_node or _guess_current(view)
        svg = await call(diagram, definition.canonical, view.version, states, current)
        signals = awaited_signals(graph)
        waiting = [
            graph["nodes"][t.node_id].get("signal")
            for t in view.tokens
            if t.state == "AWAITING" and t.node_id in graph["nodes"]
        ]
        ordered = [s for s in waiting if s] + [s for s in signals if s not in waiting]
        return {
            "view": view,
            "svg": svg,
            "current": current,
            "live_tokens": [t for t in view.tokens if t.live],
            "signals": list(dict.fromkeys(ordered)),
            "signal_of": {
                node_id: node["signal"]
                for node_id, node in graph["nodes"].items()
                if node.get("kind") == "await"
            },
            "notice": NOTICES.get(request.query_params.get("notice", ""), ""),
            "live_url": request.url.path,
        }

    async def instance(request: Request) -> Response:
        instance_id = request.path_params["instance_id"]
        context = await _instance_context(request, instance_id)
        if fragment(request):
            return page(request, "_instance_live.html", context)
        return page(request, "instance.html", context)

    async def signal(request: Request) -> Response:
        instance_id = request.path_params["instance_id"]
        form = await checked_form(request)
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
            return page(request, "instance.html", context, 400)
        if form.get("confirm") != "yes":
            return page(
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
        delivered = await call(backend.signal, instance_id, name, payload)
        notice = "signal_delivered" if delivered else "signal_buffered"
        return RedirectResponse(
            f"/instances/{quote(instance_id, safe='')}?notice={notice}", status_code=303
        )

    async def cancel(request: Request) -> Response:
        instance_id = request.path_params["instance_id"]
        form = await checked_form(request)
        reason = str(form.get("reason", "")).strip()[:2000]
        if form.get("confirm") != "yes":
            return page(
                request,
                "confirm.html",
                {"instance_id": instance_id, "action": "cancel", "fields": {"reason": reason}},
            )
        await call(backend.cancel, instance_id, reason)
        return RedirectResponse(
            f"/instances/{quote(instance_id, safe='')}?notice=cancelled", status_code=303
        )

    # -- flows -------------------------------------------------------------------------------

    async def _versions(name: str = "") -> tuple[list[FlowVersion], bool]:
        try:
            return await call(backend.list_definitions, name), True
        except Unsupported:
            return [], False

    async def flows(request: Request) -> Response:
        versions, supported = await _versions()
        by_name: dict[str, list[FlowVersion]] = {}
        for v in versions:
            by_name.setdefault(v.name, []).append(v)
        if not supported:  # older server: the flows its newest instances ran
            query = filter_from_query({"page_size": "200"})
            result = await call(backend.list_instances, query)
            for row in result.rows:
                seen = by_name.setdefault(row.flow, [])
                version = next((v for v in seen if v.version == row.version), None)
                if version is None:
                    version = FlowVersion(row.flow, row.version, 0, "", {})
                    seen.append(version)
                version.counts[row.status] = version.counts.get(row.status, 0) + 1
        return page(
            request,
            "flows.html",
            {"flows": dict(sorted(by_name.items())), "supported": supported},
        )

    async def _flow_context(request: Request, name: str, version: str) -> dict[str, Any]:
        definition = await call(backend.get_definition, name, version)
        graph = orjson.loads(definition.canonical)
        versions, supported = await _versions(name)
        svg = await call(diagram, definition.canonical, definition.version, None, "")
        return {
            "definition": definition,
            "graph": graph,
            "svg": svg,
            "versions": versions,
            "versions_supported": supported,
            "source_json": pretty_json(graph),
            "source_yaml": _yaml(graph),
            "input_schema": pretty_json(graph.get("input")) if graph.get("input") else "",
            "signals": awaited_signals(graph),
            "input_text": "{}" if graph.get("input") else "null",
            "problems": [],
        }

    async def flow(request: Request) -> Response:
        name = request.path_params["name"]
        context = await _flow_context(request, name, request.query_params.get("version", ""))
        return page(request, "flow.html", context)

    async def start(request: Request) -> Response:
        name = request.path_params["name"]
        form = await checked_form(request)
        version = str(form.get("version", ""))
        text = str(form.get("input", ""))
        context = await _flow_context(request, name, version)
        try:
            value = parse_json_input(text, "the input")
            problems = schema_problems(context["graph"].get("input"), value)
        except JsonInputError as exc:
            problems = [str(exc)]
        if problems:
            context.update(problems=problems, input_text=text)
            return page(request, "flow.html", context, 400)
        try:
            started = await call(backend.start, name, context["definition"].version, value)
        except errors.InputRejected as exc:
            context.update(problems=[str(exc)], input_text=text)
            return page(request, "flow.html", context, 400)
        return RedirectResponse(
            f"/instances/{quote(started.instance_id, safe='')}?notice=started", status_code=303
        )

    # -- workers -----------------------------------------------------------------------------

    async def workers(request: Request) -> Response:
        try:
            rows = await call(backend.list_workers)
            supported = True
        except Unsupported:
            rows, supported = [], False
        return page(request, "workers.html", {"workers": rows, "supported": supported})

    # -- login -------------------------------------------------------------------------------

    async def login(request: Request) -> Response:
        target = request.query_params.get("next", "/")
        if not target.startswith("/") or target.startswith("//"):
            target = "/"  # never redirect off the console
        if request.method == "GET":
            return page(request, "login.html", {"next": target, "problem": ""})
        form = await checked_form(request)
        session = sessions.login(str(form.get("token", "")))
        if session is None:
            return page(
                request, "login.html", {"next": target, "problem": "wrong token"}, status_code=401
            )
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(
            sec.SESSION_COOKIE,
            session,
            max_age=sec.SESSION_SECONDS,
            httponly=True,
            samesite="strict",
            secure=settings.secure_cookies,
        )
        return response

    async def logout(request: Request) -> Response:
        await checked_form(request)
        sessions.logout(request.cookies.get(sec.SESSION_COOKIE))
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(sec.SESSION_COOKIE)
        return response

    routes = [
        Route("/", home),
        Route("/instances", guarded(instances)),
        Route("/instances/{instance_id}", guarded(instance)),
        Route("/instances/{instance_id}/signal", guarded(signal), methods=["POST"]),
        Route("/instances/{instance_id}/cancel", guarded(cancel), methods=["POST"]),
        Route("/flows", guarded(flows)),
        Route("/flows/{name}", guarded(flow)),
        Route("/flows/{name}/start", guarded(start), methods=["POST"]),
        Route("/workers", guarded(workers)),
        Route("/login", guarded(login), methods=["GET", "POST"]),
        Route("/logout", guarded(logout), methods=["POST"]),
        Mount("/static", StaticFiles(directory=str(_HERE / "static")), name="static"),
    ]
    middleware = [Middleware(_Guard, settings=settings, sessions=sessions)]
    return Starlette(routes=routes, middleware=middleware)


def _guess_current(view: InstanceDetail) -> str:
    """For servers that do not send `current_node`: the one live token's node, else the node
    of the last event."""
    live = {t.node_id for t in view.tokens if t.live}
    if len(live) == 1:
        return next(iter(live))
    for event in reversed(view.events):
        if event.node_id:
            return event.node_id
    return ""


def _yaml(document: Any) -> str:
    import io

    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    out = io.StringIO()
    yaml.dump(document, out)
    return out.getvalue()
