"""Serving the console with uvicorn: in the foreground (`wiggle console`) or on a background
thread (`wiggle run --console`, the tests).

The listening socket is bound here, before uvicorn starts, so port 0 works and the URL can be
printed (and a browser pointed at it) before the first request.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from wiggle.console._app import ConsoleSettings, create_app
from wiggle.console._backend import Backend
from wiggle.console._security import is_loopback
from wiggle.console._traces import check_trace_url
from wiggle.errors import InvalidRequest
from wiggle.server._credentials import CredentialError, CredentialStore

__all__ = ["ConsoleServer", "parse_listen", "settings_for"]


def parse_listen(listen: str) -> tuple[str, int]:
    """`HOST:PORT` (or `[::1]:PORT`) as a host and a port number."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise InvalidRequest(f"--listen {listen[:80]!r}: expected HOST:PORT, e.g. 127.0.0.1:8080")
    return host.strip("[]") or "127.0.0.1", int(port)


def settings_for(
    host: str,
    token: str | None,
    *,
    require_login: bool | None = None,
    tls: bool = False,
    trusted_proxies: Iterable[str] = (),
    credentials: str | None = None,
    person: str | None = None,
    trace_url: str | None = None,
) -> ConsoleSettings:
    """Safe defaults from the bind host: off loopback, or behind a trusted proxy, a login with
    `token` (or a credential of `credentials`) is required (and one must be given); on loopback
    only loopback Host names are answered, except through the trusted proxy. A credentials file
    asks for the login on loopback too: it is there to tell people apart."""
    proxies = frozenset(_proxy_address(p) for p in trusted_proxies if p.strip())
    loopback = is_loopback(host)
    if require_login is None:
        login = not loopback or bool(proxies) or bool(credentials)
    else:
        login = require_login
    if proxies and not login:
        raise InvalidRequest(
            "behind a trusted proxy the console is reachable from other machines: it cannot "
            "do without its login"
        )
    if credentials:
        _check_credentials(credentials)
    problem = check_trace_url(trace_url) if trace_url else None
    if trace_url and problem:
        raise InvalidRequest(f"--trace-url {trace_url[:200]!r}: {problem}")
    if login and not token and not credentials:
        if not loopback:
            why = f"the console on {host} would be reachable from other machines"
        elif proxies:
            why = "behind --trusted-proxy the console is reachable from other machines"
        else:
            why = "--require-login asks for the server's token at the login"
        raise InvalidRequest(
            f"{why}: give --token (the server's bearer token), which people then type to log "
            "in, or --credentials (the server's credentials file: each person logs in with "
            "their own token)"
        )
    return ConsoleSettings(
        token=token,
        require_login=login,
        loopback_only=loopback,
        secure_cookies=tls,
        trusted_proxies=proxies,
        credentials=credentials,
        person=person,
        trace_url=trace_url or None,
    )


def _check_credentials(path: str) -> None:
    """A credentials file that cannot be read or parsed stops the console at start."""
    try:
        CredentialStore(Path(path))
    except CredentialError as exc:
        raise InvalidRequest(f"--credentials: {exc}") from None


def _proxy_address(text: str) -> str:
    """An IP address as written in --trusted-proxy (the address the proxy connects from)."""
    value = text.strip().strip("[]")
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        raise InvalidRequest(
            f"--trusted-proxy {text[:80]!r}: expected the IP address the proxy connects from, "
            "e.g. 127.0.0.1"
        ) from None


@dataclass
class ConsoleServer:
    """A console bound to `host:port` over `backend`. `start()` serves on a thread and returns
    the port; `run()` serves in this thread until SIGINT / SIGTERM."""

    backend: Backend
    host: str = "127.0.0.1"
    port: int = 8080
    settings: ConsoleSettings | None = None
    tls_cert: str | None = None
    tls_key: str | None = None

    def __post_init__(self) -> None:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        self._socket = socket.socket(family, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._socket.bind((self.host, self.port))
        except OSError as exc:
            self._socket.close()
            raise InvalidRequest(
                f"cannot listen on {self.host}:{self.port}: {exc.strerror}"
            ) from None
        self._socket.listen(128)
        self.port = self._socket.getsockname()[1]
        app = create_app(self.backend, self.settings)
        config = uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,
            ssl_certfile=self.tls_cert,
            ssl_keyfile=self.tls_key,
            timeout_graceful_shutdown=2,
        )
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        scheme = "https" if self.tls_cert else "http"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{host}:{self.port}"

    def run(self) -> None:
        try:
            self._server.run(sockets=[self._socket])
        finally:
            self._socket.close()

    def start(self) -> int:
        self._thread = threading.Thread(target=self.run, name="wiggle-console", daemon=True)
        self._thread.start()
        return self.port

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._socket.close()
