"""The console's guard rails: security headers, Host checks, login and CSRF.

- Every response carries a strict Content-Security-Policy: scripts and styles only from the
  console's own /static files, no inline script, no framing, forms post only to the console.
- Bound to loopback, the console answers only requests whose Host is a loopback name, so a web
  page on another origin cannot reach it through DNS rebinding.
- Off loopback (or when asked), every page but /login and /static needs a session: the login
  form takes a bearer token of the gRPC API (the shared --token, or a credential of the
  credentials file: `_identity`), and answers a random session id in an HttpOnly,
  SameSite=Strict cookie; the session remembers who logged in. Sessions live in memory;
  restarting the console logs everyone out.
- Every POST carries the per-browser CSRF token of the `wiggle_csrf` cookie in a form field
  (double submit); a POST whose Origin is another site is refused as well.
- Behind a TLS-terminating proxy declared with --trusted-proxy, requests from that address are
  taken at the host and scheme the proxy names (X-Forwarded-Host, X-Forwarded-Proto) and the
  client it names (the last X-Forwarded-For entry); from any other address those headers are
  ignored. A console behind a proxy is reachable from other machines: it requires the login.
- Over HTTPS (direct, or as the trusted proxy says) every answer carries HSTS.
- Failed logins are limited per client address (LOGIN_FAILURES in LOGIN_WINDOW_S, then 429),
  in a table of bounded size.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass

from starlette.datastructures import FormData
from starlette.requests import Request

from wiggle.console._identity import Identity

__all__ = [
    "CSP",
    "CSRF_COOKIE",
    "HSTS",
    "SESSION_COOKIE",
    "CsrfError",
    "LoginLimiter",
    "RequestOrigin",
    "Sessions",
    "check_csrf",
    "host_allowed",
    "is_loopback",
    "request_origin",
    "security_headers",
]

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
CSRF_COOKIE = "wiggle_csrf"
SESSION_COOKIE = "wiggle_session"
SESSION_SECONDS = 12 * 3600
HSTS = "max-age=31536000"
#: At most this many failed logins per client address in LOGIN_WINDOW_S; then 429 until the
#: oldest of them leaves the window.
LOGIN_FAILURES = 10
LOGIN_WINDOW_S = 300.0
#: Client addresses remembered at most (the least recently seen is forgotten first).
LOGIN_TABLE = 4096

_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


class CsrfError(Exception):
    """A POST without the browser's CSRF token, or from another origin."""


def is_loopback(host: str) -> bool:
    """Whether a bind host only accepts connections from this machine."""
    host = host.strip("[]")
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _hostname(host_header: str) -> str:
    if host_header.startswith("["):  # [::1]:8080
        return host_header[1 : host_header.find("]")] if "]" in host_header else host_header
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header


def host_allowed(host_header: str, *, loopback_only: bool) -> bool:
    """A loopback console answers only to loopback Host names (DNS-rebinding guard)."""
    if not loopback_only:
        return True
    return is_loopback(_hostname(host_header.lower()))


def security_headers(https: bool = False) -> dict[str, str]:
    headers = {
        "Content-Security-Policy": CSP,
        "X-Content-Type-Options": "nosniff",
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "same-origin",
        "Cache-Control": "no-store",
    }
    if https:
        headers["Strict-Transport-Security"] = HSTS
    return headers


@dataclass(frozen=True)
class RequestOrigin:
    """Where a request is addressed to and comes from, after the trusted proxy (if any)."""

    host: str  # the Host the browser used
    scheme: str  # "http" or "https", as the browser sees the console
    client: str  # the browser's address
    proxied: bool  # it came through the trusted proxy


def _first(value: str | None) -> str:
    return (value or "").split(",")[0].strip()


def request_origin(request: Request, trusted_proxies: frozenset[str]) -> RequestOrigin:
    """The request's host, scheme and client; the X-Forwarded-* headers count only when the
    connection comes from a trusted proxy."""
    peer = request.client.host if request.client is not None else ""
    host = request.headers.get("host", "")
    scheme = request.url.scheme
    if peer and peer in trusted_proxies:
        forwarded_for = [a.strip() for a in request.headers.get("x-forwarded-for", "").split(",")]
        return RequestOrigin(
            host=_first(request.headers.get("x-forwarded-host")) or host,
            scheme=_first(request.headers.get("x-forwarded-proto")).lower() or scheme,
            client=forwarded_for[-1] or peer,
            proxied=True,
        )
    return RequestOrigin(host=host, scheme=scheme, client=peer, proxied=False)


def new_secret() -> str:
    return secrets.token_urlsafe(32)


def check_csrf(request: Request, form: FormData, host: str | None = None) -> None:
    """Raise CsrfError unless the form carries the browser's CSRF cookie value and the request
    does not come from another origin than `host` (default: the Host header)."""
    cookie = request.cookies.get(CSRF_COOKIE, "")
    sent = form.get("csrf")
    if not cookie or not isinstance(sent, str) or not hmac.compare_digest(cookie, sent):
        raise CsrfError("the form's CSRF token is missing or does not match; reload the page")
    origin = request.headers.get("origin")
    if origin and origin != "null":
        expected = host if host is not None else request.headers.get("host", "")
        if origin.split("://", 1)[-1] != expected:
            raise CsrfError("the form was posted from another origin")


class LoginLimiter:
    """Failed logins per client address in a sliding window, in a table of bounded size.
    Thread-safe."""

    def __init__(
        self,
        failures: int = LOGIN_FAILURES,
        window_s: float = LOGIN_WINDOW_S,
        table: int = LOGIN_TABLE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._failures = failures
        self._window = window_s
        self._table = table
        self._clock = clock
        self._lock = threading.Lock()
        self._seen: OrderedDict[str, deque[float]] = OrderedDict()

    def wait_s(self, client: str) -> float:
        """Seconds before `client` may try again; 0 when it may now."""
        now = self._clock()
        with self._lock:
            times = self._seen.get(client)
            if times is None:
                return 0.0
            while times and times[0] <= now - self._window:
                times.popleft()
            if len(times) < self._failures:
                return 0.0
            return max(0.0, times[0] + self._window - now)

    def failed(self, client: str) -> None:
        now = self._clock()
        with self._lock:
            times = self._seen.pop(client, None) or deque(maxlen=self._failures)
            times.append(now)
            self._seen[client] = times  # most recently seen last
            while len(self._seen) > self._table:
                self._seen.popitem(last=False)

    def succeeded(self, client: str) -> None:
        with self._lock:
            self._seen.pop(client, None)


class Sessions:
    """Logged-in browsers: random session ids, each with its expiry and who logged in, kept in
    memory (the identity holds the token the console calls the server with for that person)."""

    def __init__(self) -> None:
        self._ids: dict[str, tuple[float, Identity]] = {}
        self._lock = threading.Lock()

    def open(self, identity: Identity) -> str:
        """A new session id for `identity`."""
        session = new_secret()
        with self._lock:
            now = time.monotonic()
            self._ids = {s: v for s, v in self._ids.items() if v[0] > now}  # drop expired
            self._ids[session] = (now + SESSION_SECONDS, identity)
        return session

    def identity(self, session: str | None) -> Identity | None:
        """Who the session is, None when it is unknown or has expired."""
        if not session:
            return None
        with self._lock:
            found = self._ids.get(session)
        if found is None or found[0] <= time.monotonic():
            return None
        return found[1]

    def valid(self, session: str | None) -> bool:
        return self.identity(session) is not None

    def logout(self, session: str | None) -> None:
        with self._lock:
            self._ids.pop(session or "", None)
