"""Prometheus metrics over HTTP, shared by the server and the worker.

Each process (each `Server`, each `Worker`) keeps its own registry rather than the library's
global one, so two of them in one process (tests, `wiggle run`) never collide; `MetricsEndpoint`
serves one registry at http://HOST:PORT/metrics from a daemon thread until it is closed.
"""

from __future__ import annotations

import logging
from typing import Any

from wiggle.errors import WiggleError

__all__ = ["MetricsEndpoint", "MetricsError", "split_address"]

_log = logging.getLogger("wiggle.metrics")


class MetricsError(WiggleError):
    """The metrics endpoint cannot listen where asked."""


def split_address(address: str) -> tuple[str, int]:
    """`host:port` (port 0: any free port; `[::1]:9090` for IPv6)."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise MetricsError(f"metrics address {address[:80]!r}: expected HOST:PORT")
    return host.strip("[]") or "0.0.0.0", int(port)


class MetricsEndpoint:
    """An HTTP server exposing one registry in the Prometheus text format."""

    def __init__(self, address: str, registry: Any) -> None:
        from prometheus_client import start_http_server

        host, port = split_address(address)
        try:
            self._httpd, self._thread = start_http_server(port, addr=host, registry=registry)
        except OSError as exc:
            raise MetricsError(f"cannot serve metrics on {address}: {exc.strerror}") from None
        self.host = host
        self.port: int = self._httpd.server_port
        _log.info("metrics at http://%s:%d/metrics", host, self.port)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
