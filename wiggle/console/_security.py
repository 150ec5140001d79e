"""The console's guard rails: security headers, Host checks, login and CSRF.

- Every response carries a strict Content-Security-Policy: scripts and styles only from the
  console's own /static files, no inline script, no framing, forms post only to the console.
- Bound to loopback, the console answers only requests whose Host is a loopback name, so a web
  page on another origin cannot reach it through DNS rebinding.
- Off loopback (or when asked), every page but /login and /static needs a session: the login
  form takes the same bearer token as the gRPC API and answers a random session id in an
  HttpOnly, SameSite=Strict cookie. Sessions live in memory; restarting the console logs
  everyone out.
- Every POST carries the per-browser CSRF token of the `wiggle_csrf` cookie in a form field
  (double submit); a POST whose Origin is another site is refused as well.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
import threading
import time
from dataclasses import dataclass

from starlette.datastructures import FormData
from starlette.requests import Request

__all__ = [
    "CSP",
    "CSRF_COOKIE",
    "SESSION_COOKIE",
    "CsrfError",
    "Sessions",
    "check_csrf",
    "host_allowed",
    "is_loopback",
    "security_headers",
]

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
CSRF_COOKIE = "wiggle_csrf"
SESSION_COOKIE = "wiggle_session"
SESSION_SECONDS = 12 * 3600

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


def security_headers() -> dict[str, str]:
    return {
        "Content-Security-Policy": CSP,
        "X-Content-Type-Options": "nosniff",
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "same-origin",
        "Cache-Control": "no-store",
    }


def new_secret() -> str:
    return secrets.token_urlsafe(32)


def check_csrf(request: Request, form: FormData) -> None:
    """Raise CsrfError unless the form carries the browser's CSRF cookie value and the request
    does not come from another origin."""
    cookie = request.cookies.get(CSRF_COOKIE, "")
    sent = form.get("csrf")
    if not cookie or not isinstance(sent, str) or not hmac.compare_digest(cookie, sent):
        raise CsrfError("the form's CSRF token is missing or does not match; reload the page")
    origin = request.headers.get("origin")
    if origin and origin != "null":
        host = request.headers.get("host", "")
        if origin.split("://", 1)[-1] != host:
            raise CsrfError("the form was posted from another origin")


@dataclass
class Sessions:
    """Logged-in browsers: random session ids with an expiry, kept in memory."""

    token: str | None
    _ids: dict[str, float]
    _lock: threading.Lock

    @classmethod
    def for_token(cls, token: str | None) -> Sessions:
        return cls(token, {}, threading.Lock())

    def login(self, offered: str) -> str | None:
        """A new session id when `offered` is the token, else None."""
        if self.token is None or not hmac.compare_digest(offered.encode(), self.token.encode()):
            return None
        session = new_secret()
        with self._lock:
            now = time.monotonic()
            self._ids = {s: t for s, t in self._ids.items() if t > now}  # drop expired
            self._ids[session] = now + SESSION_SECONDS
        return session

    def valid(self, session: str | None) -> bool:
        if not session:
            return False
        with self._lock:
            expires = self._ids.get(session)
        return expires is not None and expires > time.monotonic()

    def logout(self, session: str | None) -> None:
        with self._lock:
            self._ids.pop(session or "", None)
