"""What the console reads from and sends to a Wiggle server, as plain view data.

Reads go straight to the gRPC API because the console shows fields the client's dataclasses do
not carry yet (token explanations and contexts, child ids, counts, next-page tokens); actions
(start, signal, cancel) and definitions go through `wiggle.client.Client`, like the CLI's.

A server that predates an RPC answers UNIMPLEMENTED: that becomes `Unsupported`, which the pages
turn into a short note instead of an error. Older servers also ignore the newer ListInstances
filters, so the same filters are applied again here to the page they return (a filter applied
twice changes nothing).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc
import orjson

from wiggle import errors
from wiggle._proto.wiggle.v1 import wiggle_pb2 as pb
from wiggle._proto.wiggle.v1 import wiggle_pb2_grpc as pb_grpc
from wiggle.client import (
    Client,
    Definition,
    InstanceStatus,
    Started,
    TlsConfig,
    open_channel,
    token_metadata,
)
from wiggle.client._errors import from_rpc_error

__all__ = [
    "STATUSES",
    "Backend",
    "EventView",
    "FlowVersion",
    "InstanceDetail",
    "InstanceFilter",
    "InstancePage",
    "InstanceRow",
    "TokenView",
    "Unsupported",
    "WorkerView",
]

T = TypeVar("T")

STATUSES = ("RUNNING", "COMPLETED", "FAILED", "CANCELLED")


class Unsupported(errors.WiggleError):
    """The server does not implement this call (it predates it)."""


@dataclass(frozen=True)
class InstanceFilter:
    """The instance list's filters, as the page's query string carries them."""

    flow: str = ""
    status: str = ""  # one of STATUSES, or "" for all
    version: str = ""
    id_contains: str = ""
    started_after_ms: int = 0  # 0: no bound
    started_before_ms: int = 0
    page_token: str = ""
    page_size: int = 50

    def matches(self, row: InstanceRow) -> bool:
        return (
            (not self.flow or row.flow == self.flow)
            and (not self.status or row.status == self.status)
            and (not self.version or row.version == self.version)
            and (not self.id_contains or self.id_contains in row.instance_id)
            and (not self.started_after_ms or row.created_at_ms >= self.started_after_ms)
            and (not self.started_before_ms or row.created_at_ms < self.started_before_ms)
        )


@dataclass(frozen=True)
class InstanceRow:
    instance_id: str
    flow: str
    version: str
    status: str
    created_at_ms: int
    updated_at_ms: int
    current_node: str
    reason: str


@dataclass(frozen=True)
class InstancePage:
    rows: list[InstanceRow]
    next_page_token: str
    counts: dict[str, int] | None  # None: the server does not count


@dataclass(frozen=True)
class TokenView:
    token_id: str
    node_id: str
    state: str
    attempt: int
    lease_owner: str
    lease_expires_at_ms: int
    wake_at_ms: int
    branch: str
    context: Any
    queue: str
    activity: str
    wait_kind: str
    child_instance_id: str
    ready_at_ms: int
    explanation: str

    @property
    def live(self) -> bool:
        return self.state != "DONE"


@dataclass(frozen=True)
class EventView:
    seq: int
    at_ms: int
    kind: str
    node_id: str
    attempt: int
    detail: Any


@dataclass(frozen=True)
class InstanceDetail:
    instance_id: str
    flow: str
    version: str
    status: str
    context: Any
    input: Any
    reason: str
    execution_mode: str
    parent_instance_id: str
    child_instance_ids: list[str]
    current_node: str
    created_at_ms: int
    updated_at_ms: int
    tokens: list[TokenView] = field(default_factory=list)
    events: list[EventView] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.status != "RUNNING"


@dataclass(frozen=True)
class FlowVersion:
    name: str
    version: str
    registered_at_ms: int
    execution_mode: str
    counts: dict[str, int]


@dataclass(frozen=True)
class WorkerView:
    worker_id: str
    queues: list[str]
    activities: list[str]
    slots: int
    sdk: str
    first_seen_ms: int
    last_poll_ms: int


def _loads(data: bytes) -> Any:
    if not data:
        return None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return data.decode(errors="replace")


def _status_name(value: int) -> str:
    name = pb.InstanceStatus.Name(value)
    return "" if name == "INSTANCE_STATUS_UNSPECIFIED" else name


def _row(msg: pb.Instance) -> InstanceRow:
    return InstanceRow(
        msg.instance_id,
        msg.flow,
        msg.version,
        _status_name(msg.status),
        msg.created_at_ms,
        msg.updated_at_ms,
        msg.current_node,
        msg.reason,
    )


def _token(t: pb.Token) -> TokenView:
    return TokenView(
        t.token_id,
        t.node_id,
        pb.TokenState.Name(t.state),
        t.attempt,
        t.lease_owner,
        t.lease_expires_at_ms,
        t.wake_at_ms,
        t.branch,
        _loads(t.context),
        t.queue,
        t.activity,
        t.wait_kind,
        t.child_instance_id,
        t.ready_at_ms,
        t.explanation,
    )


def _detail(msg: pb.Instance) -> InstanceDetail:
    return InstanceDetail(
        instance_id=msg.instance_id,
        flow=msg.flow,
        version=msg.version,
        status=_status_name(msg.status),
        context=_loads(msg.context),
        input=_loads(msg.input),
        reason=msg.reason,
        execution_mode=pb.ExecutionMode.Name(msg.execution_mode),
        parent_instance_id=msg.parent_instance_id,
        child_instance_ids=list(msg.child_instance_ids),
        current_node=msg.current_node,
        created_at_ms=msg.created_at_ms,
        updated_at_ms=msg.updated_at_ms,
        tokens=[_token(t) for t in msg.tokens],
        events=[
            EventView(e.seq, e.at_ms, e.kind, e.node_id, e.attempt, _loads(e.detail))
            for e in msg.events
        ],
    )


class Backend:
    """One server's API as the console uses it. Thread-safe; blocking calls."""

    def __init__(
        self,
        address: str,
        *,
        token: str | None = None,
        tls: TlsConfig | None = None,
        timeout: float = 10.0,
    ) -> None:
        self.address = address
        self._channel = open_channel(address, tls)
        self._stub = pb_grpc.WiggleStub(self._channel)  # type: ignore[no-untyped-call]
        self._metadata = token_metadata(token)
        self._timeout = timeout
        # Actions retry for a short while only: a person is waiting on the page.
        self.client = Client(address, token=token, tls=tls, timeout=timeout, retry_for=2.0)

    def close(self) -> None:
        self.client.close()
        self._channel.close()

    def _call(self, method: Callable[..., T], request: Any) -> T:
        try:
            return method(request, timeout=self._timeout, metadata=self._metadata)
        except grpc.RpcError as exc:
            code = exc.code() if callable(getattr(exc, "code", None)) else None
            if code is grpc.StatusCode.UNIMPLEMENTED:
                raise Unsupported(f"the server at {self.address} does not support this") from None
            raise from_rpc_error(exc, self.address) from None

    # -- reads -------------------------------------------------------------------------------

    def list_instances(self, query: InstanceFilter) -> InstancePage:
        request = pb.ListInstancesRequest(
            flow=query.flow,
            page_size=query.page_size,
            page_token=query.page_token,
            version=query.version,
            started_after_ms=query.started_after_ms,
            started_before_ms=query.started_before_ms,
            id_contains=query.id_contains,
            include_counts=True,
        )
        if query.status:
            request.status = pb.InstanceStatus.Value(query.status)  # type: ignore[assignment]
        response = self._call(self._stub.ListInstances, request)
        rows = [r for r in map(_row, response.instances) if query.matches(r)]
        counts = {name: int(n) for name, n in response.counts.items()} or None
        return InstancePage(rows, response.next_page_token, counts)

    def describe(self, instance_id: str) -> InstanceDetail:
        request = pb.DescribeInstanceRequest(instance_id=instance_id, include_events=True)
        return _detail(self._call(self._stub.DescribeInstance, request))

    def list_definitions(self, name: str = "") -> list[FlowVersion]:
        request = pb.ListDefinitionsRequest(name=name, include_counts=True)
        response = self._call(self._stub.ListDefinitions, request)
        return [
            FlowVersion(
                d.name,
                d.version,
                d.registered_at_ms,
                pb.ExecutionMode.Name(d.execution_mode),
                {status: int(n) for status, n in d.instance_counts.items()},
            )
            for d in response.definitions
        ]

    def list_workers(self) -> list[WorkerView]:
        response = self._call(self._stub.ListWorkers, pb.ListWorkersRequest())
        return [
            WorkerView(
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

    def get_definition(self, name: str, version: str = "") -> Definition:
        return self.client.get_definition(name, version or None)

    # -- actions -----------------------------------------------------------------------------

    def start(self, flow: str, version: str, value: Any) -> Started:
        return self.client.start(flow, value, version=version or None)

    def signal(self, instance_id: str, name: str, payload: Any) -> bool:
        return self.client.signal(instance_id, name, payload)

    def cancel(self, instance_id: str, reason: str) -> InstanceStatus:
        return self.client.cancel(instance_id, reason)
