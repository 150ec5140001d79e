"""The console as a Starlette app over a `Backend`: the guard around every request, the login,
and the pages (`_instances`, `_flows`, `_operate`, `_bulk`, `_migrations`, `_schedules`),
rendered with Jinja2 templates.

Who is asking is decided here, per request (`_identity`): without a login the console itself
(an admin); with one, the person whose token opened the session. Every call to the server is
then made with that person's token (`_backend.acting_as`), and a person whose credential has
only the `person` scope is let into the Tasks pages alone.

Pages are server-rendered HTML; the one script (static/console.js) refreshes the live part of
a page by fetching the same URL with `X-Wiggle-Fragment: 1`, which answers that part alone.
Actions (start, signal, cancel, retry, reset, bulk actions, migrations, a schedule's pause,
unpause, trigger and backfill) are POSTs with a CSRF token. An instance action first answers
a confirmation page and only its second POST acts; a bulk action, a migration and a backfill
are previewed first (a bulk action and a migration ask for the number of instances typed in);
a schedule's pause, unpause and trigger act at once, as their commands do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import FileResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from wiggle.console import (
    _bulk,
    _flows,
    _instances,
    _migrations,
    _operate,
    _schedules,
    _tasks,
)
from wiggle.console import _security as sec
from wiggle.console._backend import Backend, acting_as, done
from wiggle.console._identity import Authenticator, CredentialsLogin, Identity, console_identity
from wiggle.console._pages import FRAGMENT_HEADER, Pages
from wiggle.console._traces import check_trace_url

__all__ = ["ConsoleSettings", "create_app"]

_HERE = Path(__file__).parent
_OPEN_PATHS = ("/login", "/static/", "/favicon.ico")
#: What a login that may only act on its own human tasks may open.
_TASK_PATHS = ("/tasks", "/logout")


@dataclass(frozen=True)
class ConsoleSettings:
    """How the app guards itself (the bind address decides the defaults, see `wiggle console`).

    `require_login`: every page needs a session, opened with `token` or a credential of
    `credentials` (or what `authenticator` accepts). `loopback_only`: answer only to loopback
    Host names (but through a trusted proxy). `secure_cookies`: mark cookies Secure (served over
    TLS; also set per request when a trusted proxy says HTTPS). `trusted_proxies`: addresses
    whose X-Forwarded-Host/-Proto/-For are honoured. `flows_dir`: flow files (and their
    samples/) that give a flow's description and a sample input for its start form.
    `credentials`: the server's credentials file, whose tokens log people in (each as the
    credential's name, groups and scopes). `person`: the name a console without a login acts
    on human tasks under (`--as`). `authenticator`: another way to map a login to a person
    (the seam for an identity provider); by default the token and the credentials file.
    `trace_url`: a URL template with `{trace_id}` (`--trace-url`) that makes an instance's
    trace id a link to the operator's trace viewer on its page.
    """

    token: str | None = None
    require_login: bool = False
    loopback_only: bool = True
    secure_cookies: bool = False
    refresh_ms: int = 2000
    trusted_proxies: frozenset[str] = frozenset()
    flows_dir: str | None = None
    credentials: str | None = None
    person: str | None = None
    authenticator: Authenticator | None = None
    trace_url: str | None = None

    def __post_init__(self) -> None:
        problem = check_trace_url(self.trace_url) if self.trace_url else None
        if problem:
            raise ValueError(problem)
        if self.require_login and not (self.token or self.credentials or self.authenticator):
            raise ValueError(
                "a console that requires a login needs the token or the credentials file to "
                "check it against"
            )

    def login(self) -> Authenticator:
        if self.authenticator is not None:
            return self.authenticator
        return CredentialsLogin(Path(self.credentials) if self.credentials else None, self.token)


class _Guard(BaseHTTPMiddleware):
    def __init__(
        self, app: Any, settings: ConsoleSettings, sessions: sec.Sessions, pages: Pages
    ) -> None:
        super().__init__(app)
        self.settings = settings
        self.sessions = sessions
        self.pages = pages
        self.own = console_identity(settings.person, settings.token)

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        origin = sec.request_origin(request, self.settings.trusted_proxies)
        request.scope["wiggle.origin"] = origin
        https = origin.scheme == "https"
        response = await self._guarded(request, call_next, origin, https)
        response.headers.update(sec.security_headers(https=https))
        return response

    async def _guarded(
        self,
        request: Request,
        call_next: RequestResponseEndpoint,
        origin: sec.RequestOrigin,
        https: bool,
    ) -> Response:
        loopback_only = self.settings.loopback_only and not origin.proxied
        if not sec.host_allowed(origin.host, loopback_only=loopback_only):
            return PlainTextResponse("unexpected Host header", status_code=400)
        csrf = request.cookies.get(sec.CSRF_COOKIE) or ""
        fresh = len(csrf) < 32
        if fresh:
            csrf = sec.new_secret()
        request.scope["wiggle.csrf"] = csrf
        path = request.url.path
        who: Identity | None = self.own
        if self.settings.require_login:
            who = self.sessions.identity(request.cookies.get(sec.SESSION_COOKIE))
        request.scope["wiggle.identity"] = who
        if who is None and not path.startswith(_OPEN_PATHS):
            if request.method == "GET" and FRAGMENT_HEADER not in request.headers:
                target = "/login?" + urlencode({"next": request.url.path})
                response: Response = RedirectResponse(target, status_code=303)
            else:
                response = PlainTextResponse("log in first", status_code=401)
        elif who is not None and not who.reads_everything and not _tasks_only(path):
            response = self._tasks_only(request, who)
        else:
            mark = acting_as(who)
            try:
                response = await call_next(request)
            finally:
                done(mark)
        # A new token's cookie comes only with a whole page that shows it: a live refresh
        # updates part of a page that had its token, and one answered while the browser was
        # clearing its cookies (the CSRF cookie gone, the session not yet) could land after the
        # next page and leave that page's forms unmatched.
        if (
            fresh
            and request.scope.get("wiggle.csrf_shown")
            and FRAGMENT_HEADER not in request.headers
        ):
            response.set_cookie(
                sec.CSRF_COOKIE,
                csrf,
                httponly=True,
                samesite="strict",
                secure=self.settings.secure_cookies or https,
            )
        return response

    def _tasks_only(self, request: Request, who: Identity) -> Response:
        """A login that may only act on its tasks, asking for anything else."""
        if request.url.path == "/" and request.method == "GET":
            return RedirectResponse("/tasks", status_code=303)
        message = (
            f"{who.person} may see only their human tasks here: this console page needs a "
            "credential with the admin, operator or client scope."
        )
        if FRAGMENT_HEADER in request.headers or request.method != "GET":
            return PlainTextResponse(message, status_code=403)
        return self.pages.page(request, "error.html", {"message": message}, 403)


def _tasks_only(path: str) -> bool:
    """Whether a login with only the `person` scope may open `path`."""
    return path.startswith(_OPEN_PATHS) or any(
        path == p or path.startswith(p + "/") for p in _TASK_PATHS
    )


def create_app(backend: Backend, settings: ConsoleSettings | None = None) -> Starlette:
    """The console as an ASGI app talking to the server behind `backend`."""
    settings = settings or ConsoleSettings()
    sessions = sec.Sessions()
    authenticator = settings.login()
    limiter = sec.LoginLimiter()
    pages = Pages.create(
        backend,
        refresh_ms=settings.refresh_ms,
        login_required=settings.require_login,
        flows_dir=settings.flows_dir,
        trace_url=settings.trace_url,
    )
    pages.templates.env.globals["people_login"] = bool(
        settings.credentials or settings.authenticator
    )

    async def home(request: Request) -> Response:
        return RedirectResponse("/instances", status_code=303)

    async def favicon(request: Request) -> Response:
        return FileResponse(_HERE / "static" / "favicon.svg", media_type="image/svg+xml")

    async def login(request: Request) -> Response:
        target = request.query_params.get("next", "/")
        if not target.startswith("/") or target.startswith("//"):
            target = "/"  # never redirect off the console
        if request.method == "GET":
            return pages.page(request, "login.html", {"next": target, "problem": ""})
        form = await pages.checked_form(request)
        origin: sec.RequestOrigin = request.scope["wiggle.origin"]
        wait = limiter.wait_s(origin.client)
        if wait > 0:
            problem = (
                f"too many failed logins from {origin.client}; try again in {math.ceil(wait)} s"
            )
            response = pages.page(
                request, "login.html", {"next": target, "problem": problem}, status_code=429
            )
            response.headers["Retry-After"] = str(math.ceil(wait))
            return response
        who = await pages.call(authenticator.identify, str(form.get("token", "")))
        if who is None:
            limiter.failed(origin.client)
            return pages.page(
                request, "login.html", {"next": target, "problem": "wrong token"}, status_code=401
            )
        limiter.succeeded(origin.client)
        session = sessions.open(who)
        if not who.reads_everything and not _tasks_only(target):
            target = "/tasks"  # what a person who may see only their tasks came for
        redirect = RedirectResponse(target, status_code=303)
        redirect.set_cookie(
            sec.SESSION_COOKIE,
            session,
            max_age=sec.SESSION_SECONDS,
            httponly=True,
            samesite="strict",
            secure=settings.secure_cookies or origin.scheme == "https",
        )
        return redirect

    async def logout(request: Request) -> Response:
        await pages.checked_form(request)
        sessions.logout(request.cookies.get(sec.SESSION_COOKIE))
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(sec.SESSION_COOKIE)
        return response

    routes = [
        Route("/", home),
        Route("/favicon.ico", favicon),
        *_instances.routes(pages),
        *_flows.routes(pages),
        *_operate.routes(pages),
        *_bulk.routes(pages),
        *_migrations.routes(pages),
        *_schedules.routes(pages),
        *_tasks.routes(pages),
        Route("/login", pages.guarded(login), methods=["GET", "POST"]),
        Route("/logout", pages.guarded(logout), methods=["POST"]),
        Mount("/static", StaticFiles(directory=str(_HERE / "static")), name="static"),
    ]
    middleware = [Middleware(_Guard, settings=settings, sessions=sessions, pages=pages)]
    return Starlette(routes=routes, middleware=middleware)
