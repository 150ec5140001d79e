"""One Wiggle server process: the gRPC service over an Engine, plus health, reflection,
authentication, TLS, size limits, the ticker and graceful shutdown.

Why a synchronous `grpc.server` over a thread pool rather than grpc.aio: every handler is a
blocking engine call (SQLAlchemy), so under asyncio each call would hop to a thread anyway; on two
cores a micro-benchmark of a simulated engine call measured the sync server at least as fast
(~1650 vs ~1450 calls/s) with simpler code. Idle long polls park in the engine's wait, which
releases the GIL, so a generous pool costs memory, not CPU.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
import socket
import threading
from collections.abc import Sequence
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from wiggle._metrics import MetricsEndpoint, split_address
from wiggle._proto.wiggle.v1 import admin_pb2 as apb
from wiggle._proto.wiggle.v1 import admin_pb2_grpc as admin_grpc
from wiggle._proto.wiggle.v1 import wiggle_pb2 as pb
from wiggle._proto.wiggle.v1 import wiggle_pb2_grpc as pb_grpc
from wiggle.engine import Engine
from wiggle.errors import WiggleError
from wiggle.server._admin_service import AdminService
from wiggle.server._auth import Auth, is_loopback
from wiggle.server._credentials import CredentialError, CredentialStore, read_token_file
from wiggle.server._retention import Retention
from wiggle.server._service import POLL_SLICE_S, WiggleService
from wiggle.server._ticker import Ticker

if TYPE_CHECKING:
    from wiggle.server._metrics import ServerMetrics

__all__ = ["Server", "ServerConfig", "ServerConfigError", "serve"]

_log = logging.getLogger("wiggle.server")

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["Wiggle"].full_name
ADMIN_SERVICE_NAME = apb.DESCRIPTOR.services_by_name["WiggleAdmin"].full_name
DEFAULT_ADDRESS = "127.0.0.1:7233"
DEFAULT_MAX_PAYLOAD = 4 * 1024 * 1024
#: Headroom above the largest single payload for the rest of a message. An AdvanceRun batch
#: carries many contexts, so a whole message may be several payloads long.
MESSAGE_PAYLOADS = 4
MESSAGE_OVERHEAD = 1024 * 1024


def _check_free(address: str) -> None:
    """Refuse an address another process listens on before gRPC tries it: gRPC would print a
    line of its own (its C core's log) before failing, and then only "failed to bind"."""
    host, _, port = address.rpartition(":")
    if not port.isdigit() or int(port) == 0:
        return  # gRPC parses (and refuses) what this does not; port 0 is always free
    try:
        found = socket.getaddrinfo(
            host.strip("[]") or None, int(port), type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except OSError:
        return  # an unresolvable host: gRPC says so
    for family, kind, proto, _, where in found:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC binds
            try:
                probe.bind(where)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise ServerConfigError(
                        f"cannot listen on {address}: the address is in use (another server?)"
                    ) from None
                return  # not ours to judge (no IPv6 here, say): gRPC decides


class ServerConfigError(WiggleError):
    """The server cannot start as configured (e.g. no token on a public address)."""


@dataclass(frozen=True)
class ServerConfig:
    address: str = DEFAULT_ADDRESS
    token: str | None = None  # one shared token that stands for an admin
    token_file: Path | None = None  # the same, read from a file (kept out of the command line)
    credentials: Path | None = None  # named credentials with scopes (docs/security.md)
    tls_cert: Path | None = None  # PEM certificate chain of this server
    tls_key: Path | None = None  # its PEM private key
    tls_client_ca: Path | None = None  # PEM CA bundle: when set, clients must present a cert
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD
    #: The largest request message; None: room for a few payloads (an AdvanceRun batch).
    max_request_bytes: int | None = None
    max_workers: int = 128  # the handler thread pool (idle long polls each hold one thread)
    max_poll_wait_s: float = 60.0
    grace_s: float = 10.0  # how long in-flight calls may run on after shutdown begins
    # Prune instances that finished longer ago than this (None: keep them all); the leader
    # does it, every retention_interval_s.
    retention_ms: int | None = None
    retention_interval_s: float = 60.0
    metrics_address: str | None = None  # HOST:PORT of the Prometheus endpoint (None: none)
    #: OpenTelemetry tracing (docs/observability.md). None: on when the OTEL_* variables say so.
    tracing: bool | None = None

    def check(self) -> None:
        if self.token and self.token_file is not None:
            raise ServerConfigError("give --token or --token-file, not both")
        if not (self.token or self.token_file or self.credentials) and not is_loopback(
            self.address
        ):
            raise ServerConfigError(
                f"refusing to listen on {self.address} without credentials: set --credentials, "
                "--token-file or --token (WIGGLE_CREDENTIALS, WIGGLE_AUTH_TOKEN_FILE, "
                "WIGGLE_AUTH_TOKEN); they are optional only on a loopback address"
            )
        self.credential_store()  # a file that cannot be read or parsed fails here, at start
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ServerConfigError("TLS needs both --tls-cert and --tls-key")
        if self.tls_client_ca is not None and self.tls_cert is None:
            raise ServerConfigError("--tls-client-ca (mutual TLS) needs --tls-cert and --tls-key")
        if self.max_payload_bytes <= 0:
            raise ServerConfigError("--max-payload-bytes must be positive")
        if self.max_request_bytes is not None and self.max_request_bytes < self.max_payload_bytes:
            raise ServerConfigError("the request limit must be at least the payload limit")
        if self.retention_ms is not None and self.retention_ms <= 0:
            raise ServerConfigError("--retention must be positive")
        if self.metrics_address is not None:
            split_address(self.metrics_address)  # a malformed one is refused before binding

    @property
    def request_limit(self) -> int:
        """The largest request message the server accepts (Task.max_request_bytes)."""
        if self.max_request_bytes is not None:
            return self.max_request_bytes
        return self.max_payload_bytes * MESSAGE_PAYLOADS + MESSAGE_OVERHEAD

    def credential_store(self) -> CredentialStore | None:
        """Who may call, or None when every caller may do everything (no credentials set)."""
        if not (self.token or self.token_file or self.credentials):
            return None
        try:
            token = read_token_file(self.token_file) if self.token_file else self.token
            return CredentialStore(self.credentials, admin_token=token)
        except CredentialError as exc:
            raise ServerConfigError(str(exc)) from None

    def server_credentials(self) -> grpc.ServerCredentials | None:
        if self.tls_cert is None or self.tls_key is None:
            return None
        try:
            pair = (self.tls_key.read_bytes(), self.tls_cert.read_bytes())
            ca = self.tls_client_ca.read_bytes() if self.tls_client_ca else None
        except OSError as exc:
            raise ServerConfigError(f"cannot read a TLS file: {exc}") from None
        return grpc.ssl_server_credentials(
            [pair], root_certificates=ca, require_client_auth=ca is not None
        )


class Server:
    """The gRPC server over `engine`. `start()` binds and returns; `stop()` shuts down gracefully.

    The engine stays the caller's: `stop()` does not close it unless `close_engine=True`.
    """

    def __init__(
        self,
        engine: Engine,
        config: ServerConfig,
        *,
        close_engine: bool = False,
        interceptors: Sequence[grpc.ServerInterceptor[Any, Any]] = (),
    ) -> None:
        """`interceptors` run after authentication, in order (the conformance runner records
        and injects faults with one, the fault suite too)."""
        config.check()
        self.config = config
        self._engine = engine
        self._close_engine = close_engine
        self._stopping = threading.Event()
        self._stopped = threading.Event()
        self._stop_lock = threading.Lock()
        self._ticker = Ticker(engine)
        self._retention = (
            Retention(engine, config.retention_ms, interval_s=config.retention_interval_s)
            if config.retention_ms is not None
            else None
        )
        self._health = health.HealthServicer()
        limit = config.request_limit
        store = config.credential_store()
        chain: list[grpc.ServerInterceptor[Any, Any]] = []
        if store is not None:
            chain.append(Auth(store))
        self._grpc = grpc.server(
            futures.ThreadPoolExecutor(
                max_workers=config.max_workers, thread_name_prefix="wiggle-rpc"
            ),
            interceptors=[*chain, *interceptors],
            options=[
                ("grpc.max_receive_message_length", limit),
                ("grpc.max_send_message_length", -1),
                ("grpc.so_reuseport", 0),  # two servers on one port by mistake must fail loudly
            ],
        )
        self.metrics: ServerMetrics | None = None
        self.tracing: Any = None  # wiggle.tracing._server.ServerTracing while tracing is on
        self._endpoint: MetricsEndpoint | None = None
        if config.metrics_address is not None:
            # prometheus_client is loaded only by a server that serves metrics.
            from wiggle.server._metrics import ServerMetrics

            self.metrics = ServerMetrics(engine)
        self._service = service = WiggleService(
            engine,
            max_payload_bytes=config.max_payload_bytes,
            max_poll_wait_s=config.max_poll_wait_s,
            # A quarter of the pool stays free for everything that is not a waiting poll.
            max_waiting_polls=max(1, config.max_workers * 3 // 4),
            stopping=self._stopping,
            max_request_bytes=limit,
            metrics=self.metrics,
        )
        pb_grpc.add_WiggleServicer_to_server(service, self._grpc)  # type: ignore[no-untyped-call]
        self._admin = admin = AdminService(
            engine, max_payload_bytes=config.max_payload_bytes, calls=service.calls
        )
        add_admin = admin_grpc.add_WiggleAdminServicer_to_server
        add_admin(admin, self._grpc)  # type: ignore[no-untyped-call]
        health_pb2_grpc.add_HealthServicer_to_server(self._health, self._grpc)
        reflection.enable_server_reflection(
            (SERVICE_NAME, ADMIN_SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME),
            self._grpc,
        )
        self.port = 0
        self._listening = False

    @property
    def service(self) -> WiggleService:
        """The Wiggle service itself, for callers in this process (wiggle.embedded)."""
        return self._service

    @property
    def admin(self) -> AdminService:
        """The WiggleAdmin service itself, for callers in this process."""
        return self._admin

    @property
    def address(self) -> str:
        """The bound `host:port` (the real port when the config asked for port 0)."""
        host = self.config.address.rsplit(":", 1)[0]
        return f"{host}:{self.port}"

    def start(self, *, listen: bool = True) -> int:
        """Bind the address and serve; then the node's own work (the ticker, retention).

        `listen=False` starts only the node's own work: an embedded node whose callers are in
        this process (wiggle.embedded) and call `service` and `admin` directly. Returns the
        bound port (0 when not listening)."""
        tls = self._listen() if listen else False
        if self.metrics is not None and self.config.metrics_address is not None:
            self._endpoint = MetricsEndpoint(self.config.metrics_address, self.metrics.registry)
            db = self._engine.db
            db.event_observers.append(self.metrics.events)
            db.transaction_observers.append(self.metrics.transaction)
        self._start_tracing()
        if listen:
            self._grpc.start()
            self._listening = True
        self._ticker.start()
        if self._retention is not None:
            self._retention.start()
        for name in ("", SERVICE_NAME):
            self._health.set(name, health_pb2.HealthCheckResponse.SERVING)
        if listen:
            _log.info("wiggle server listening on %s%s", self.address, " (TLS)" if tls else "")
        return self.port

    def _listen(self) -> bool:
        """Bind the configured address; whether with TLS."""
        creds = self.config.server_credentials()
        _check_free(self.config.address)
        try:
            if creds is None:
                self.port = self._grpc.add_insecure_port(self.config.address)
            else:
                self.port = self._grpc.add_secure_port(self.config.address, creds)
        except RuntimeError as exc:
            raise ServerConfigError(f"cannot listen on {self.config.address}: {exc}") from None
        if self.port == 0:
            raise ServerConfigError(f"cannot listen on {self.config.address} (address in use?)")
        return creds is not None

    def stop(self, grace: float | None = None) -> None:
        """Stop accepting calls, let in-flight ones finish within the grace period, then stop
        the ticker (and close the engine if it is ours). Safe to call twice."""
        with self._stop_lock:
            if self._stopping.is_set():
                self._stopped.wait()
                return
            self._stopping.set()  # long polls answer empty at their next slice
        self._engine.wake()  # waiting long polls end their slice now, not at its end
        try:
            self._health.enter_graceful_shutdown()
            if self._listening:
                self._grpc.stop(self.config.grace_s if grace is None else grace).wait()
            # gRPC has answered or cancelled every call, but a handler thread may still be in
            # the engine (a long poll finishing its wait slice): let it return first.
            if not self._service.wait_idle(POLL_SLICE_S + 1.0):
                _log.warning("handlers still running at shutdown")
            if self._retention is not None:
                self._retention.stop()
            self._ticker.stop()
            self._stop_metrics()
            self._stop_tracing()
            if self._close_engine:
                self._engine.close()
        finally:
            self._stopped.set()
        if self.port:  # a server that never listened has nothing to announce
            _log.info("wiggle server stopped")

    @property
    def metrics_port(self) -> int:
        """The bound port of the metrics endpoint (0 when there is none)."""
        return self._endpoint.port if self._endpoint is not None else 0

    def _stop_metrics(self) -> None:
        if self._endpoint is None or self.metrics is None:
            return
        self._endpoint.close()
        db = self._engine.db
        with contextlib.suppress(ValueError):
            db.event_observers.remove(self.metrics.events)
        with contextlib.suppress(ValueError):
            db.transaction_observers.remove(self.metrics.transaction)

    def _start_tracing(self) -> None:
        """Spans of the engine's events, and tasks that carry their trace context, when
        tracing is on; nothing of OpenTelemetry is imported otherwise."""
        from wiggle import tracing

        on = self.config.tracing
        if not (tracing.enabled() if on is None else on):
            return
        from wiggle.tracing._sdk import Sdk
        from wiggle.tracing._server import ServerTracing

        metrics = self.metrics
        sdk = Sdk(
            "server",
            on_dropped=(lambda n: metrics.spans_dropped.inc(n)) if metrics is not None else None,
        )
        self.tracing = ServerTracing(sdk, tracing.layout())
        self._engine.db.trace_observers.append(self.tracing.events)
        self._engine.trace_context = True
        _log.info("tracing on: spans to %s", _endpoint())

    def _stop_tracing(self) -> None:
        if self.tracing is None:
            return
        with contextlib.suppress(ValueError):
            self._engine.db.trace_observers.remove(self.tracing.events)
        self.tracing.sdk.shutdown()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the server has stopped; False on timeout."""
        return self._stopped.wait(timeout)


def _endpoint() -> str:
    return (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or "the OTLP default"
    )


def serve(engine: Engine, config: ServerConfig, *, ready: threading.Event | None = None) -> None:
    """Run a server until SIGTERM or SIGINT, then shut down gracefully (main thread only)."""
    server = Server(engine, config, close_engine=True)
    shutdown = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        _log.info("received %s; shutting down", signal.Signals(signum).name)
        shutdown.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        server.start()
        if ready is not None:
            ready.set()
        # A timed wait: the signal may land on one of gRPC's threads, and Python runs handlers
        # only when the main thread next executes bytecode, which an untimed wait never does.
        while not shutdown.wait(0.5):
            pass
    finally:
        server.stop()
        for s, handler in previous.items():
            signal.signal(s, handler)
