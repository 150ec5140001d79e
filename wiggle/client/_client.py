"""`Client`: deploy flows and start, signal, cancel, describe and wait for instances (repairs
and schedules are mixed in from _admin and _schedules)."""

from __future__ import annotations

import copy
import logging
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import grpc
import orjson

from wiggle import errors
from wiggle._proto.wiggle.v1 import admin_pb2_grpc as admin_grpc
from wiggle._proto.wiggle.v1 import wiggle_pb2 as pb
from wiggle._proto.wiggle.v1 import wiggle_pb2_grpc as pb_grpc
from wiggle.client._admin import AdminCalls
from wiggle.client._errors import from_rpc_error
from wiggle.client._schedules import ScheduleCalls
from wiggle.client._tasks import TaskCalls
from wiggle.client._tracing import current_trace_context
from wiggle.client._types import (
    Definition,
    DefinitionSummary,
    Deployment,
    Event,
    Incident,
    IncidentPage,
    Instance,
    InstancePage,
    InstanceStatus,
    NodeCount,
    QueueInfo,
    Started,
    Token,
    TokenState,
    WorkerInfo,
)
from wiggle.wire import (
    Backoff,
    Retry,
    TlsConfig,
    code_of,
    open_channel,
    retrying,
    token_metadata,
)

if TYPE_CHECKING:
    from wiggle.compiler import CompiledFlow

__all__ = ["Client", "EagerSlotLike", "EagerWorker"]

_log = logging.getLogger("wiggle.client")

T = TypeVar("T")

DEFAULT_ADDRESS = "127.0.0.1:7233"
#: `wait` asks the server to hold each WaitInstance this long (it answers at the instance's end).
WAIT_SLICE_S = 30.0
#: ... and gives the call this much longer before its own deadline.
WAIT_MARGIN_S = 5.0


class EagerSlotLike(Protocol):
    def dispatch(self, task: pb.Task) -> bool: ...
    def release(self) -> None: ...


class EagerWorker(Protocol):
    """What `start(worker=...)` needs of a worker living in this process (eager dispatch,
    docs/worker-protocol.md)."""

    @property
    def worker_id(self) -> str: ...
    @property
    def queues(self) -> tuple[str, ...]: ...
    def reserve_eager_slot(self) -> EagerSlotLike | None: ...


def _unreachable(exc: grpc.RpcError) -> bool:
    return code_of(exc) is grpc.StatusCode.UNAVAILABLE


def _json(value: Any) -> bytes:
    try:
        return orjson.dumps(value)
    except TypeError as exc:
        raise errors.InvalidRequest(f"not JSON-serialisable: {exc}") from None


def _loads(data: bytes) -> Any:
    return orjson.loads(data) if data else None


def _token(t: pb.Token) -> Token:
    return Token(
        t.token_id,
        t.node_id,
        TokenState(pb.TokenState.Name(t.state)),
        t.attempt,
        t.lease_owner,
        t.lease_expires_at_ms,
        t.wake_at_ms,
        t.branch,
        context=_loads(t.context),
        queue=t.queue,
        activity=t.activity,
        wait_kind=t.wait_kind,
        child_instance_id=t.child_instance_id,
        ready_at_ms=t.ready_at_ms,
        parent_token_id=t.parent_token_id,
        explanation=t.explanation,
    )


def _instance(msg: pb.Instance) -> Instance:
    return Instance(
        instance_id=msg.instance_id,
        flow=msg.flow,
        version=msg.version,
        status=InstanceStatus(pb.InstanceStatus.Name(msg.status)),
        context=_loads(msg.context),
        reason=msg.reason,
        execution_mode=pb.ExecutionMode.Name(msg.execution_mode),
        parent_instance_id=msg.parent_instance_id,
        created_at_ms=msg.created_at_ms,
        updated_at_ms=msg.updated_at_ms,
        tokens=[_token(t) for t in msg.tokens],
        events=[
            Event(e.seq, e.at_ms, e.kind, e.node_id, e.attempt, _loads(e.detail))
            for e in msg.events
        ],
        input=_loads(msg.input),
        child_instance_ids=list(msg.child_instance_ids),
        current_node=msg.current_node,
        search=_loads(msg.search) or {},
        step_inputs=_loads(msg.step_inputs) or {},
        started_by=msg.started_by,
        trace_id=msg.trace_id,
    )


class Client(AdminCalls, ScheduleCalls, TaskCalls):
    """A connection to one Wiggle server. Thread-safe; close it (or use `with`) when done.

    Every method raises the wiggle.errors class the server's status maps to. Calls that are safe
    to repeat (reads, deploy, cancel, a start with a caller-chosen id) are retried with backoff
    for up to `retry_for` seconds while the server is UNAVAILABLE.
    """

    def __init__(
        self,
        address: str = DEFAULT_ADDRESS,
        *,
        token: str | None = None,
        tls: TlsConfig | None = None,
        timeout: float = 30.0,
        retry_for: float = 10.0,
    ) -> None:
        self.address = address
        self._channel: grpc.Channel | None = open_channel(address, tls)
        self._stub = pb_grpc.WiggleStub(self._channel)  # type: ignore[no-untyped-call]
        self._admin = admin_grpc.WiggleAdminStub(self._channel)  # type: ignore[no-untyped-call]
        self._metadata = token_metadata(token)
        self._timeout = timeout
        self._retry_for = retry_for

    @classmethod
    def over_stubs(
        cls, stub: Any, admin: Any, *, label: str, timeout: float = 30.0, retry_for: float = 10.0
    ) -> Client:
        """A client whose calls go to `stub` (the Wiggle service's methods) and `admin` (the
        WiggleAdmin service's) instead of a channel: an embedded node's services called in
        its own process (wiggle.embedded). `label` names them in messages, as an address
        would."""
        client = cls.__new__(cls)
        client.address = label
        client._channel = None
        client._stub, client._admin = stub, admin
        client._metadata = ()
        client._timeout = timeout
        client._retry_for = retry_for
        return client

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()

    def with_token(self, token: str | None) -> Client:
        """A client over this one's channel that presents `token` instead: for a service that
        calls on behalf of several people (the console, as each person logged in). It costs
        no connection of its own; close the original, not this one."""
        twin = copy.copy(self)
        twin._metadata = token_metadata(token)
        return twin

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing ----------------------------------------------------------------------------

    def _call(
        self,
        method: Callable[..., T],
        request: Any,
        *,
        idempotent: bool,
        timeout: float | None = None,
    ) -> T:
        retry = Retry(
            self._retry_for if idempotent else 0.0, backoff=Backoff(initial=0.05, cap=2.0)
        )
        try:
            return retrying(
                lambda: method(request, timeout=timeout or self._timeout, metadata=self._metadata),
                retry,
                _unreachable,
            )
        except grpc.RpcError as exc:
            raise from_rpc_error(exc, self.address) from None

    # -- definitions -------------------------------------------------------------------------

    def deploy(
        self, flow: str | os.PathLike[str] | bytes | CompiledFlow, *, filename: str = ""
    ) -> Deployment:
        """Register a flow: a path to a YAML/JSON file, its source bytes, or a CompiledFlow.

        Registering a version that exists already is a no-op (`created` is False).
        """
        if isinstance(flow, bytes):
            request = pb.RegisterDefinitionRequest(source=flow, filename=filename or "<flow>")
        elif isinstance(flow, str | os.PathLike):
            path = Path(flow)
            try:
                source = path.read_bytes()
            except OSError as exc:
                raise errors.InvalidRequest(f"cannot read {path}: {exc.strerror}") from None
            request = pb.RegisterDefinitionRequest(source=source, filename=filename or str(path))
        else:
            request = pb.RegisterDefinitionRequest(graph=flow.canonical)
        response = self._call(self._stub.RegisterDefinition, request, idempotent=True)
        return Deployment(response.name, response.version, response.created)

    def get_definition(self, name: str, version: str | None = None) -> Definition:
        request = pb.GetDefinitionRequest(name=name, version=version or "")
        msg = self._call(self._stub.GetDefinition, request, idempotent=True)
        return Definition(msg.name, msg.version, msg.graph, msg.registered_at_ms)

    # -- instances ---------------------------------------------------------------------------

    def start(
        self,
        flow: str,
        input: Any = None,
        *,
        version: str | None = None,
        instance_id: str | None = None,
        worker: EagerWorker | None = None,
        traceparent: str | None = None,
        tracestate: str | None = None,
    ) -> Started:
        """Start an instance of `flow` with `input` (any JSON value).

        `traceparent` (and `tracestate`): the W3C trace context the instance's trace continues
        (docs/observability.md). None: the current OpenTelemetry span's, when the application
        has OpenTelemetry loaded and a span is current; "": none.

        With `worker` (a Worker running in this process), eager dispatch: a slot is reserved on
        the worker first and the server hands the first task back in the start response, so it
        runs without a poll round trip. Best effort: no free slot, a task on a queue the worker
        does not serve, or a worker that declines all fall back to ordinary dispatch. A declined
        task stays leased to the worker until its lease expires, then is redelivered.
        """
        request = pb.StartInstanceRequest(
            flow=flow, version=version or "", input=_json(input), instance_id=instance_id or ""
        )
        if traceparent is None:
            traceparent, tracestate = current_trace_context()
        request.traceparent = traceparent
        request.tracestate = tracestate or ""
        slot = self._reserve(worker)
        if slot is not None and worker is not None:
            request.eager.worker_id = worker.worker_id
            request.eager.queues.extend(worker.queues)
        try:
            # Without a caller-chosen id a retried start could create a second instance.
            response = self._call(
                self._stub.StartInstance, request, idempotent=instance_id is not None
            )
        except BaseException:
            if slot is not None:
                slot.release()
            raise
        eager = False
        if slot is not None:
            eager = self._hand_over(slot, response)
        return Started(response.instance_id, response.version, response.created, eager)

    @staticmethod
    def _reserve(worker: EagerWorker | None) -> EagerSlotLike | None:
        if worker is None:
            return None
        try:
            return worker.reserve_eager_slot()
        except Exception:  # eager is an optimisation: never fail a start over it
            _log.warning("could not reserve an eager slot; starting without", exc_info=True)
            return None

    @staticmethod
    def _hand_over(slot: EagerSlotLike, response: pb.StartInstanceResponse) -> bool:
        try:
            if response.HasField("eager_task"):
                return slot.dispatch(response.eager_task)
            return False
        except Exception:
            _log.warning("eager dispatch failed; the task will be redelivered", exc_info=True)
            return False
        finally:
            slot.release()  # a no-op after a dispatch

    def signal(self, instance_id: str, name: str, payload: Any = None) -> bool:
        """Send signal `name`; True when an await took it now, False when buffered for later."""
        request = pb.SignalInstanceRequest(
            instance_id=instance_id, name=name, payload=_json(payload)
        )
        # Not retried: a signal that did arrive would be delivered twice.
        response = self._call(self._stub.SignalInstance, request, idempotent=False)
        return bool(response.delivered)

    def cancel(self, instance_id: str, reason: str = "") -> InstanceStatus:
        request = pb.CancelInstanceRequest(instance_id=instance_id, reason=reason)
        response = self._call(self._stub.CancelInstance, request, idempotent=True)
        return InstanceStatus(pb.InstanceStatus.Name(response.status))

    def describe(self, instance_id: str, *, events: bool = False) -> Instance:
        request = pb.DescribeInstanceRequest(instance_id=instance_id, include_events=events)
        return _instance(self._call(self._stub.DescribeInstance, request, idempotent=True))

    def list_instances(
        self,
        *,
        flow: str | None = None,
        status: InstanceStatus | str | None = None,
        version: str | None = None,
        started_after_ms: int | None = None,
        started_before_ms: int | None = None,
        id_contains: str | None = None,
        where: Sequence[str] = (),
        limit: int = 100,
        page_token: str | None = None,
        counts: bool = False,
    ) -> InstancePage:
        """One page of instances (without tokens and events), newest first.

        `where`: conditions of the filter language (`status=FAILED`, `age>1h`, `order=A-1002`,
        `total>5000`: built-in fields and the flows' search attributes), all of which must hold.

        Pass the page's `next_page_token` as `page_token` for the next one; with `counts`, the
        page also says how many instances match per status (the filter without `status`).
        """
        request = pb.ListInstancesRequest(
            flow=flow or "",
            status=str(status).upper() if status else None,
            version=version or "",
            started_after_ms=started_after_ms or 0,
            started_before_ms=started_before_ms or 0,
            id_contains=id_contains or "",
            page_size=limit,
            page_token=page_token or "",
            include_counts=counts,
            where=list(where),
        )
        response = self._call(self._stub.ListInstances, request, idempotent=True)
        return InstancePage(
            [_instance(m) for m in response.instances],
            response.next_page_token,
            dict(response.counts),
        )

    def list_definitions(
        self, name: str | None = None, *, counts: bool = False
    ) -> list[DefinitionSummary]:
        """Registered versions by flow name, newest version of each name first."""
        request = pb.ListDefinitionsRequest(name=name or "", include_counts=counts)
        response = self._call(self._stub.ListDefinitions, request, idempotent=True)
        return [
            DefinitionSummary(
                d.name,
                d.version,
                d.registered_at_ms,
                pb.ExecutionMode.Name(d.execution_mode),
                dict(d.instance_counts),
            )
            for d in response.definitions
        ]

    def list_workers(self, *, seen_within_ms: int = 0) -> tuple[list[WorkerInfo], int]:
        """Workers that polled recently (the server's default window unless given), and the
        server's clock in ms (to say how long ago each last polled)."""
        request = pb.ListWorkersRequest(seen_within_ms=seen_within_ms)
        response = self._call(self._stub.ListWorkers, request, idempotent=True)
        workers = [
            WorkerInfo(
                w.worker_id,
                list(w.queues),
                list(w.activities),
                w.slots,
                w.sdk,
                w.first_seen_ms,
                w.last_poll_ms,
            )
            for w in response.workers
        ]
        return workers, response.server_now_ms

    # -- operators' aggregates (read only) -----------------------------------------------------

    def list_queues(self) -> tuple[list[QueueInfo], int]:
        """Every queue holding READY or leased tasks, and the server's clock in ms."""
        request = pb.ListWorkersRequest(include_queues=True)
        response = self._call(self._stub.ListWorkers, request, idempotent=True)
        queues = [
            QueueInfo(q.queue, q.ready, q.oldest_ready_at_ms, q.leased) for q in response.queues
        ]
        return queues, response.server_now_ms

    def node_counts(self, name: str, version: str | None = None) -> list[NodeCount]:
        """Where the instances of a version (the newest unless given) stand: RUNNING ones per
        node and live token state, FAILED ones at the node they failed at."""
        request = pb.GetDefinitionRequest(
            name=name, version=version or "", include_node_counts=True
        )
        msg = self._call(self._stub.GetDefinition, request, idempotent=True)
        return [NodeCount(c.node_id, c.state, c.instances) for c in msg.node_counts]

    def list_incidents(
        self,
        *,
        flow: str | None = None,
        version: str | None = None,
        failed_after_ms: int | None = None,
        limit: int = 100,
    ) -> IncidentPage:
        """FAILED instances grouped by flow, node and reason, the largest group first."""
        request = pb.ListIncidentsRequest(
            flow=flow or "",
            version=version or "",
            failed_after_ms=failed_after_ms or 0,
            limit=limit,
        )
        response = self._call(self._stub.ListIncidents, request, idempotent=True)
        incidents = [
            Incident(
                i.flow,
                i.node_id,
                i.reason,
                i.instances,
                i.first_failed_at_ms,
                i.last_failed_at_ms,
                list(i.instance_ids),
            )
            for i in response.incidents
        ]
        return IncidentPage(incidents, response.failed)

    def wait_once(self, instance_id: str, wait_s: float, *, events: bool = False) -> Instance:
        """One WaitInstance: the instance once it ends, or as it is after `wait_s` seconds."""
        request = pb.WaitInstanceRequest(
            instance_id=instance_id, wait_ms=int(wait_s * 1000), include_events=events
        )
        msg = self._call(
            self._stub.WaitInstance, request, idempotent=True, timeout=wait_s + WAIT_MARGIN_S
        )
        return _instance(msg)

    def wait(
        self, instance_id: str, timeout: float | None = None, *, events: bool = False
    ) -> Instance:
        """Block until the instance is no longer RUNNING; TimeoutError after `timeout` s.

        One long poll (WaitInstance) at a time: the server answers as soon as the instance
        ends, so this costs no polling and reports the end without delay.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            wait_s = WAIT_SLICE_S
            if deadline is not None:
                wait_s = min(wait_s, max(deadline - time.monotonic(), 0.0))
            view = self.wait_once(instance_id, wait_s, events=events)
            if view.status.finished:
                return view
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"instance {instance_id!r} still RUNNING after {timeout} s")
