"""What every page handler shares: the backend, the templates, the guard rails' helpers.

A handler answers a whole page, or with the header `X-Wiggle-Fragment: 1` only its live part
(`fragment`), which static/console.js swaps in every few seconds.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response
from starlette.templating import Jinja2Templates

from wiggle import errors
from wiggle.console import _security as sec
from wiggle.console._backend import STATUSES, Backend
from wiggle.console._listing import conditions_text, failed_at
from wiggle.console._sources import FlowSources
from wiggle.console._text import ago, duration, format_ms, pretty_json, short_version, zoned
from wiggle.console._traces import trace_link

__all__ = ["FRAGMENT_HEADER", "Handler", "Pages"]

FRAGMENT_HEADER = "x-wiggle-fragment"
_HERE = Path(__file__).parent

Handler = Callable[[Request], Awaitable[Response]]


def page_path(collection: str, key: str) -> str:
    """The address of one thing's page (`/instances/ID`): where actions redirect to, and where a
    page rendered by a refused action (a POST) refreshes its live part from."""
    return f"/{collection}/{quote(key, safe='')}"


def _status_of(exc: errors.WiggleError) -> int:
    if isinstance(exc, errors.NotFound):
        return 404
    if isinstance(exc, errors.InvalidRequest | errors.Conflict):
        return 400
    if isinstance(exc, errors.PermissionDenied | errors.Unauthenticated):
        return 403  # the console's credential may not do this (repairs need the operator scope)
    if isinstance(exc, errors.Unavailable):
        return 503
    return 502


def _iso(ms: int) -> str:
    if not ms:
        return ""
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).isoformat(timespec="milliseconds")


@dataclass
class Pages:
    """The console's shared state; handlers are built over one of these."""

    backend: Backend
    templates: Jinja2Templates
    sources: FlowSources
    refresh_ms: int
    login_required: bool

    @classmethod
    def create(
        cls,
        backend: Backend,
        *,
        refresh_ms: int,
        login_required: bool,
        flows_dir: str | None,
        trace_url: str | None = None,
    ) -> Pages:
        templates = Jinja2Templates(directory=str(_HERE / "templates"))
        env = templates.env
        env.filters["ms"] = format_ms
        env.filters["iso"] = _iso
        env.filters["ago"] = ago
        env.filters["duration"] = duration
        env.filters["failed_at"] = failed_at
        env.filters["short"] = short_version
        env.filters["pretty"] = pretty_json
        env.filters["compact"] = lambda v: orjson.dumps(v).decode()
        env.filters["path"] = lambda v: quote(str(v), safe="")
        env.filters["conditions"] = conditions_text
        env.filters["local"] = zoned
        env.globals["STATUSES"] = STATUSES
        env.globals["refresh_ms"] = refresh_ms
        env.globals["login_required"] = login_required
        env.globals["trace_link"] = partial(trace_link, trace_url)
        return cls(backend, templates, FlowSources(flows_dir), refresh_ms, login_required)

    def page(
        self, request: Request, name: str, context: dict[str, Any], status_code: int = 200
    ) -> Response:
        # The middleware sets a new CSRF cookie only on a whole page that carries the token: a
        # redirect or a live refresh minting one of its own could land after the page with the
        # form and leave that form's token unmatched (a login then fails).
        request.scope["wiggle.csrf_shown"] = True
        context = {
            "csrf": request.scope.get("wiggle.csrf", ""),
            "path": request.url.path,
            "who": request.scope.get("wiggle.identity"),
            "now": int(time.time() * 1000),
            **context,
        }
        return self.templates.TemplateResponse(request, name, context, status_code=status_code)

    def fragment(self, request: Request) -> bool:
        """Whether only the live part of the page is asked for."""
        return FRAGMENT_HEADER in request.headers

    def failure(self, request: Request, exc: errors.WiggleError) -> Response:
        return self.page(request, "error.html", {"message": str(exc)}, _status_of(exc))

    async def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """A blocking backend call, off the event loop."""
        return await run_in_threadpool(fn, *args, **kwargs)

    async def checked_form(self, request: Request) -> FormData:
        """The POSTed form, once its CSRF token and origin are checked."""
        form = await request.form()
        origin: sec.RequestOrigin | None = request.scope.get("wiggle.origin")
        sec.check_csrf(request, form, origin.host if origin is not None else None)
        return form

    def guarded(self, handler: Handler) -> Handler:
        """`handler` with CSRF refusals and server errors turned into pages."""

        async def run(request: Request) -> Response:
            try:
                return await handler(request)
            except sec.CsrfError as exc:
                return self.page(request, "error.html", {"message": str(exc)}, 403)
            except errors.WiggleError as exc:
                return self.failure(request, exc)

        return run
