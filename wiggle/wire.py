"""What every end of a Wiggle connection agrees on: how a channel is opened, the metadata keys,
the status code and reason of each error, and how a caller backs off before trying again.

The client (`wiggle.client`), the worker (`wiggle.worker`) and the server (`wiggle.server`) all
take these from here, so a channel option, a metadata key or an error's reason changes in one
place. Nothing here does I/O beyond opening a channel.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import grpc

from wiggle import errors

__all__ = [
    "AUTHORIZATION_KEY",
    "DETAIL_KEY",
    "ERROR_CODE_KEY",
    "ERROR_TABLE",
    "REPORT_FIELDS",
    "RETRYABLE",
    "Backoff",
    "Retry",
    "TlsConfig",
    "answered_by_server",
    "code_of",
    "describe",
    "details_of",
    "error_class_for",
    "open_channel",
    "retrying",
    "status_for",
    "token_metadata",
    "unbatched",
]

T = TypeVar("T")

#: The bearer token travels in this request header: `Bearer <token>`.
AUTHORIZATION_KEY = "authorization"
#: The trailer naming an error's reason (the proto `ErrorCode` name, e.g. `STALE_LEASE`).
ERROR_CODE_KEY = "wiggle-error-code"
#: The trailer carrying an error's typed fields as JSON (binary: its key ends in `-bin`).
DETAIL_KEY = "wiggle-error-detail-bin"

#: The report RPCs, and the field of a ReportBatch's TaskReport each one travels in.
REPORT_FIELDS: dict[str, str] = {
    "CompleteTask": "complete",
    "FailTask": "fail",
    "AdvanceRun": "advance",
    "ReleaseTask": "release",
}
_RPC_OF_FIELD = {field: rpc for rpc, field in REPORT_FIELDS.items()}

#: Codes that mean "the server is not reachable right now": try again after a pause.
RETRYABLE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})

#: Every Wiggle error class, its status code and its reason. Most specific first: the server
#: answers with the first row the error is an instance of; the client rebuilds the class of the
#: first row with the reason it got (a generic reason falls back on the status code below).
ERROR_TABLE: tuple[tuple[type[errors.WiggleError], grpc.StatusCode, str], ...] = (
    (errors.FlowError, grpc.StatusCode.INVALID_ARGUMENT, "FLOW_INVALID"),
    (errors.DefinitionNotFound, grpc.StatusCode.NOT_FOUND, "DEFINITION_NOT_FOUND"),
    (errors.InstanceNotFound, grpc.StatusCode.NOT_FOUND, "INSTANCE_NOT_FOUND"),
    (errors.BatchNotFound, grpc.StatusCode.NOT_FOUND, "BATCH_NOT_FOUND"),
    (errors.ScheduleNotFound, grpc.StatusCode.NOT_FOUND, "SCHEDULE_NOT_FOUND"),
    (errors.NotFound, grpc.StatusCode.NOT_FOUND, "ERROR_CODE_UNSPECIFIED"),
    (errors.InputRejected, grpc.StatusCode.INVALID_ARGUMENT, "INPUT_REJECTED"),
    (errors.WrongPath, grpc.StatusCode.INVALID_ARGUMENT, "WRONG_PATH"),
    (errors.SignalNotAwaited, grpc.StatusCode.INVALID_ARGUMENT, "SIGNAL_NOT_AWAITED"),
    (errors.InvalidRequest, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST"),
    (errors.StaleLease, grpc.StatusCode.FAILED_PRECONDITION, "STALE_LEASE"),
    (errors.ReportOutOfOrder, grpc.StatusCode.FAILED_PRECONDITION, "REPORT_OUT_OF_ORDER"),
    (errors.InstanceNotRunning, grpc.StatusCode.FAILED_PRECONDITION, "INSTANCE_NOT_RUNNING"),
    (errors.RepairRefused, grpc.StatusCode.FAILED_PRECONDITION, "REPAIR_REFUSED"),
    (errors.InstanceExists, grpc.StatusCode.ALREADY_EXISTS, "INSTANCE_EXISTS"),
    (errors.Conflict, grpc.StatusCode.FAILED_PRECONDITION, "ERROR_CODE_UNSPECIFIED"),
    (errors.PayloadTooLarge, grpc.StatusCode.RESOURCE_EXHAUSTED, "PAYLOAD_TOO_LARGE"),
    (errors.Unauthenticated, grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED"),
    (errors.PermissionDenied, grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED"),
    (errors.Unavailable, grpc.StatusCode.UNAVAILABLE, "UNAVAILABLE"),
)

#: For a reply without a specific reason (an older server, a proxy, gRPC itself): the class its
#: status code stands for.
_BY_STATUS: dict[grpc.StatusCode, type[errors.WiggleError]] = {
    grpc.StatusCode.NOT_FOUND: errors.NotFound,
    grpc.StatusCode.INVALID_ARGUMENT: errors.InvalidRequest,
    grpc.StatusCode.FAILED_PRECONDITION: errors.Conflict,
    grpc.StatusCode.RESOURCE_EXHAUSTED: errors.PayloadTooLarge,
    grpc.StatusCode.UNAUTHENTICATED: errors.Unauthenticated,
    grpc.StatusCode.PERMISSION_DENIED: errors.PermissionDenied,
    grpc.StatusCode.UNAVAILABLE: errors.Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: errors.Unavailable,
}

_BY_REASON: dict[str, type[errors.WiggleError]] = {
    reason: cls for cls, _, reason in reversed(ERROR_TABLE) if reason != "ERROR_CODE_UNSPECIFIED"
}


def status_for(exc: errors.WiggleError) -> tuple[grpc.StatusCode, str]:
    """The status code and reason a server answers a Wiggle error with."""
    for cls, code, reason in ERROR_TABLE:
        if isinstance(exc, cls):
            return code, reason
    return grpc.StatusCode.UNKNOWN, "ERROR_CODE_UNSPECIFIED"


def error_class_for(reason: str, code: grpc.StatusCode | None) -> type[errors.WiggleError] | None:
    """The Wiggle error class a reply stands for: by its reason, else by its status code."""
    cls = _BY_REASON.get(reason)
    if cls is None and code is not None:
        cls = _BY_STATUS.get(code)
    return cls


def unbatched(item: Any) -> tuple[str, Any] | None:
    """The report RPC a ReportBatch item stands for and its request; None for an empty item."""
    which = item.WhichOneof("report")
    return None if which is None else (_RPC_OF_FIELD[which], getattr(item, which))


def code_of(exc: BaseException) -> grpc.StatusCode | None:
    """The gRPC status code of an RpcError (or of a test double with a `code()` method)."""
    code = getattr(exc, "code", None)
    if callable(code):
        value = code()
        if isinstance(value, grpc.StatusCode):
            return value
    return None


def details_of(exc: BaseException) -> str:
    """The details an RpcError carries (a test double's too); its text when it has none."""
    details = getattr(exc, "details", None)
    if callable(details):
        value = details()
        if isinstance(value, str):
            return value
    return str(exc)


def describe(exc: BaseException) -> str:
    """A failed call in one line, `UNAVAILABLE: Connection reset by peer`, for a log: an
    RpcError's own text is a multi-line dump of the call's internals."""
    code = code_of(exc)
    text = " ".join(details_of(exc).split())
    return f"{code.name}: {text}" if code is not None else text


def answered_by_server(exc: BaseException) -> bool:
    """Whether a failed call was answered by a Wiggle server (which tags its errors with the
    reason trailer) rather than failing in transport (no server reached)."""
    trailers = getattr(exc, "trailing_metadata", None)
    if not callable(trailers):
        return False
    try:
        return any(key == ERROR_CODE_KEY for key, _ in trailers() or ())
    except Exception:
        return False


class Backoff:
    """Capped exponential backoff with jitter: `initial`, twice that, ... up to `cap` seconds,
    each delay within ±20% so that many callers failing together do not retry together."""

    def __init__(self, initial: float = 0.1, cap: float = 5.0) -> None:
        self.initial = initial
        self.cap = cap
        self._next = initial

    def next_delay(self) -> float:
        delay = self._next
        self._next = min(self.cap, self._next * 2)
        return delay * random.uniform(0.8, 1.2)

    def reset(self) -> None:
        self._next = self.initial


class Retry:
    """One caller's budget for trying again: `pause()` waits the next delay of its `backoff`
    while the next try would still start within `for_s` seconds of the first, and not once
    `stopped` is set. Every retry in the client and the worker is paced by one of these."""

    def __init__(
        self,
        for_s: float,
        *,
        backoff: Backoff | None = None,
        stopped: threading.Event | None = None,
    ) -> None:
        self._give_up_at = time.monotonic() + for_s
        self._backoff = backoff or Backoff()
        self._stopped = stopped

    def pause(self) -> bool:
        """Wait before the next try and return True; False (at once, or when `stopped` is set
        during the wait) when there is to be no next try."""
        delay = self._backoff.next_delay()
        if time.monotonic() + delay >= self._give_up_at:
            return False
        if self._stopped is None:
            time.sleep(delay)
            return True
        return not self._stopped.wait(delay)

    def reset(self) -> None:
        """After a success: the next failure waits the shortest delay again."""
        self._backoff.reset()


def retrying(call: Callable[[], T], retry: Retry, again: Callable[[grpc.RpcError], bool]) -> T:
    """`call()`; while it fails with an RpcError that `again` accepts, tried again after each
    `retry.pause()`. The last error is raised when `again` refuses it or the budget is spent."""
    while True:
        try:
            return call()
        except grpc.RpcError as exc:
            if not (again(exc) and retry.pause()):
                raise


def token_metadata(token: str | None) -> tuple[tuple[str, str], ...]:
    """The request metadata that presents `token` (none without one)."""
    return ((AUTHORIZATION_KEY, f"Bearer {token}"),) if token else ()


def _read(value: str | os.PathLike[str] | bytes | None) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    return Path(value).read_bytes()


@dataclass(frozen=True)
class TlsConfig:
    """TLS towards the server. Paths or PEM bytes; every field optional.

    `ca` verifies the server (default: the system roots); `cert` + `key` are this side's
    certificate for mutual TLS; `server_name` overrides the name checked against the server's
    certificate (useful when connecting by IP address).
    """

    ca: str | os.PathLike[str] | bytes | None = None
    cert: str | os.PathLike[str] | bytes | None = None
    key: str | os.PathLike[str] | bytes | None = None
    server_name: str | None = None

    def credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            root_certificates=_read(self.ca),
            private_key=_read(self.key),
            certificate_chain=_read(self.cert),
        )


#: Answers can carry many tasks or a large context: far more than gRPC's 4 MiB default. What a
#: request may carry is the server's to say (its limits travel with every task).
MAX_RECEIVE_BYTES = 256 * 1024 * 1024

_CHANNEL_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.max_receive_message_length", MAX_RECEIVE_BYTES),
    ("grpc.max_send_message_length", -1),
    # Reconnect quickly after a server restart; the caller's own backoff paces its calls.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 5000),
    # Each channel its own connection: gRPC otherwise shares one between channels with the same
    # options, and with it the backoff state of a connection that failed: a client in the same
    # process as a worker would fail its first call after a server restart because the worker's
    # reconnect attempt was still backing off.
    ("grpc.use_local_subchannel_pool", 1),
)


def open_channel(address: str, tls: TlsConfig | bool | None = None) -> grpc.Channel:
    """A channel to the server at `address`: plain, or TLS (`True` for the system roots)."""
    options: list[tuple[str, str | int]] = list(_CHANNEL_OPTIONS)
    if not tls:
        return grpc.insecure_channel(address, options=options)
    config = tls if isinstance(tls, TlsConfig) else TlsConfig()
    if config.server_name:
        options.append(("grpc.ssl_target_name_override", config.server_name))
    return grpc.secure_channel(address, config.credentials(), options=options)
