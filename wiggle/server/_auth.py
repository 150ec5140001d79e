"""Who may call what: a server interceptor that authenticates every call and checks its scopes.

A call is authenticated by its bearer token (`authorization: Bearer <token>` metadata) or, with
mutual TLS and no token, by the identity in the client's certificate (its common name or a
subject alternative name). The standard health check is exempt: load balancers and
orchestrators probe it without credentials.

Then the credential's scopes must allow the call (docs/security.md):

    admin            everything
    client           start (without eager dispatch), signal, describe, list, wait, definitions
    operator         repair: retry, reset, cancel, bulk actions, schedules (the WiggleAdmin
                     service), and describe, list, wait, definitions, workers
    worker:QUEUES    poll those queues, and report, heartbeat or release tasks on them; fetch
                     definitions; end its polls
    person           list, show, claim, release and answer its own human tasks (as itself)

A report names a task, not a queue: a worker credential's queues travel with the report as a
grant (`GRANT`, read by the service), and the engine checks the task's queue (and, for a batch of
locally run steps, the queue of every step in it) in the report's own transaction, under the
task's lock, so a worker credential can touch nothing outside its queues and a report costs no
extra read. Refusals are PERMISSION_DENIED; unknown credentials UNAUTHENTICATED.
"""

from __future__ import annotations

import contextvars
import ipaddress
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import grpc

from wiggle._limits import quote
from wiggle.engine.model.types import QueueGrant
from wiggle.server._credentials import Credential, CredentialStore
from wiggle.wire import AUTHORIZATION_KEY, ERROR_CODE_KEY, unbatched

__all__ = ["CALLER", "CREDENTIAL", "GRANT", "Auth", "is_loopback"]

_EXEMPT_PREFIXES = ("/grpc.health.v1.Health/",)
_SERVICES = ("/wiggle.v1.Wiggle/", "/wiggle.v1.WiggleAdmin/")

#: The credential name of the call this thread is handling ("" without credentials): who asked,
#: for the record a bulk action keeps.
CALLER: contextvars.ContextVar[str] = contextvars.ContextVar("wiggle_caller", default="")
#: The credential of the call this thread is handling (None without credentials): who acts on a
#: human task, with its groups and whether it may act as an admin.
CREDENTIAL: contextvars.ContextVar[Credential | None] = contextvars.ContextVar(
    "wiggle_credential", default=None
)
#: The queues the call's credential is limited to (a `worker:QUEUES` scope), for the engine to
#: check a report's task against; None: any queue (or no credentials at all).
GRANT: contextvars.ContextVar[QueueGrant | None] = contextvars.ContextVar(
    "wiggle_grant", default=None
)

#: What a `client` scope may call.
CLIENT_METHODS = frozenset(
    {
        "StartInstance",
        "SignalInstance",
        "DescribeInstance",
        "ListInstances",
        "ListIncidents",
        "WaitInstance",
        "GetDefinition",
        "ListDefinitions",
        "ListWorkers",
    }
)
#: What a `worker:` scope may call (on its queues).
WORKER_METHODS = frozenset(
    {
        "PollTasks",
        "EndPolls",
        "GetDefinition",
        "CompleteTask",
        "FailTask",
        "ReleaseTask",
        "Heartbeat",
        "AdvanceRun",
        "ReportBatch",
    }
)
#: What a `person` scope may call: its own human tasks (docs/human-tasks.md).
PERSON_METHODS = frozenset(
    {
        "ListHumanTasks",
        "GetHumanTask",
        "ClaimHumanTask",
        "UnclaimHumanTask",
        "CompleteHumanTask",
    }
)
#: What an `operator` scope may call: every repair, and reading what to repair.
OPERATOR_METHODS = frozenset(
    {
        *PERSON_METHODS,
        "ReassignHumanTask",
        "RetryInstance",
        "ResetInstance",
        "PreviewBulk",
        "StartBulk",
        "GetBatch",
        "ListBatches",
        "UpdateBatch",
        "PlanMigration",
        "ApplyMigration",
        "RollbackMigration",
        "ApplySchedule",
        "ListSchedules",
        "DescribeSchedule",
        "PauseSchedule",
        "UnpauseSchedule",
        "TriggerSchedule",
        "DeleteSchedule",
        "PreviewBackfill",
        "StartBackfill",
        "CancelInstance",
        "DescribeInstance",
        "ListInstances",
        "WaitInstance",
        "GetDefinition",
        "ListDefinitions",
        "ListWorkers",
    }
)


class Denied(Exception):
    def __init__(self, code: grpc.StatusCode, reason: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason


def is_loopback(address: str) -> bool:
    """Whether a `host:port` listen address only accepts connections from this machine."""
    host = address.rsplit(":", 1)[0] if ":" in address else address
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name (or 0.0.0.0 / [::] binds every interface): assume reachable


def _abort(context: grpc.ServicerContext, denied: Denied) -> None:
    context.set_trailing_metadata(((ERROR_CODE_KEY, denied.reason),))
    context.abort(denied.code, str(denied))


def _unauthenticated(message: str) -> Denied:
    return Denied(grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED", message)


def _holder(cred: Credential) -> str:
    return f"credential {cred.name!r} ({cred.scopes})"


def _forbidden(cred: Credential, what: str) -> Denied:
    return Denied(
        grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED", f"{_holder(cred)} may not {what}"
    )


def grant_of(cred: Credential) -> QueueGrant | None:
    """The queues `cred` may report on, or None when it may report on any."""
    scopes = cred.scopes
    if scopes.admin or scopes.queues is None:
        return None
    return QueueGrant(scopes.queues, _holder(cred))


def _identities(context: grpc.ServicerContext) -> list[str]:
    """The names a verified client certificate carries: its CN, then its SANs."""
    auth = context.auth_context() or {}
    names: list[str] = []
    for key in ("x509_common_name", "x509_subject_alternative_name"):
        values: Iterable[Any] = auth.get(key, ())
        names.extend(v.decode(errors="replace") if isinstance(v, bytes) else str(v) for v in values)
    return names


def _queues_or_default(queues: Iterable[str]) -> list[str]:
    return list(queues) or ["default"]


if TYPE_CHECKING:
    _Interceptor = grpc.ServerInterceptor[Any, Any]
else:  # generic only in the type stubs
    _Interceptor = grpc.ServerInterceptor


class Auth(_Interceptor):
    def __init__(self, store: CredentialStore) -> None:
        self._store = store

    # -- authentication -----------------------------------------------------------------------

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler[Any, Any] | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = continuation(handler_call_details)
        method: str = handler_call_details.method
        if handler is None or method.startswith(_EXEMPT_PREFIXES):
            return handler
        self._store.reload_if_changed()
        presented = ""
        for key, value in handler_call_details.invocation_metadata or ():
            if key == AUTHORIZATION_KEY:
                presented = value if isinstance(value, str) else value.decode(errors="replace")
                break
        cred: Credential | None = None
        if presented:
            token = presented[7:] if presented.startswith("Bearer ") else ""
            cred = self._store.by_token(token) if token else None
            if cred is None:
                return _refusing(handler, _unauthenticated("unknown bearer token"))
        elif not self._store.has_identities:
            return _refusing(
                handler, _unauthenticated("missing bearer token (authorization metadata)")
            )
        name = method.rsplit("/", 1)[-1] if method.startswith(_SERVICES) else ""
        return _guarded(handler, lambda request, context: self._check(name, request, context, cred))

    def _check(
        self, name: str, request: Any, context: grpc.ServicerContext, cred: Credential | None
    ) -> None:
        if cred is None:
            identities = _identities(context)
            cred = self._store.by_identity(identities)
            if cred is None:
                who = f"certificate identity {quote(identities[0])}" if identities else "caller"
                raise _unauthenticated(
                    f"missing bearer token, and the {who} has no credential on this server"
                )
        CALLER.set(cred.name)
        CREDENTIAL.set(cred)
        GRANT.set(grant_of(cred))
        if name and request is not None:
            self.authorize(name, request, cred)

    # -- authorization ------------------------------------------------------------------------

    def authorize(self, method: str, request: Any, cred: Credential) -> None:
        """Raise Denied unless `cred` may make this call."""
        scopes = cred.scopes
        if scopes.admin:
            return
        if method in OPERATOR_METHODS and scopes.operator:
            return
        if method in PERSON_METHODS and scopes.person:
            return
        if method in CLIENT_METHODS and scopes.client:
            if method == "StartInstance" and request.HasField("eager") and request.eager.worker_id:
                self._serves(cred, _queues_or_default(request.eager.queues), "dispatch eagerly to")
            return
        if method in WORKER_METHODS and scopes.worker:
            if method == "ReportBatch":
                # The batch as a whole is refused if any report in it asks for what the
                # credential may not (a `next` task from another queue). The queue of each
                # report's task is the engine's to check, report by report (see GRANT).
                for rpc, report in filter(None, map(unbatched, request.reports)):
                    self.authorize(rpc, report, cred)
                return
            if method == "PollTasks":
                self._serves(cred, _queues_or_default(request.queues), "poll")
            elif method == "CompleteTask" and request.HasField("next") and request.next.worker_id:
                self._serves(cred, _queues_or_default(request.next.queues), "lease a task from")
            return
        raise _forbidden(cred, f"call {method}")

    def _serves(self, cred: Credential, queues: Iterable[str], verb: str) -> None:
        for queue in queues:
            if not cred.scopes.serves(queue):
                raise _forbidden(cred, f"{verb} queue {quote(queue)}")


def _guarded(
    handler: grpc.RpcMethodHandler[Any, Any],
    check: Callable[[Any, grpc.ServicerContext], None],
) -> grpc.RpcMethodHandler[Any, Any]:
    """`handler` with `check(request, context)` run first (request None for a stream)."""
    kwargs: dict[str, Any] = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.unary_unary is not None:
        inner_uu = handler.unary_unary

        def unary_unary(request: Any, context: grpc.ServicerContext) -> Any:
            try:
                check(request, context)
            except Denied as denied:
                _abort(context, denied)
            return inner_uu(request, context)

        return grpc.unary_unary_rpc_method_handler(unary_unary, **kwargs)
    if handler.unary_stream is not None:
        inner_us = handler.unary_stream

        def unary_stream(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            try:
                check(request, context)
            except Denied as denied:
                _abort(context, denied)
            yield from inner_us(request, context)

        return grpc.unary_stream_rpc_method_handler(unary_stream, **kwargs)
    if handler.stream_unary is not None:
        inner_su = handler.stream_unary

        def stream_unary(requests: Iterator[Any], context: grpc.ServicerContext) -> Any:
            try:
                check(None, context)
            except Denied as denied:
                _abort(context, denied)
            return inner_su(requests, context)

        return grpc.stream_unary_rpc_method_handler(stream_unary, **kwargs)
    inner_ss = handler.stream_stream
    assert inner_ss is not None

    def stream_stream(requests: Iterator[Any], context: grpc.ServicerContext) -> Iterator[Any]:
        try:
            check(None, context)
        except Denied as denied:
            _abort(context, denied)
        yield from inner_ss(requests, context)

    return grpc.stream_stream_rpc_method_handler(stream_stream, **kwargs)


def _refusing(
    handler: grpc.RpcMethodHandler[Any, Any], denied: Denied
) -> grpc.RpcMethodHandler[Any, Any]:
    """A handler of the same shape as `handler` that refuses every call."""

    def refuse(_request: Any, context: grpc.ServicerContext) -> None:
        raise denied

    return _guarded(handler, refuse)
