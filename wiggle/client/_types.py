"""What the client returns: plain dataclasses, never protobuf messages.

`Instance` and `Token` mirror the engine's views across the wire; where a new field of them
goes is listed in docs/internals.md, "Where an instance or token view lives".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

__all__ = [
    "Definition",
    "DefinitionSummary",
    "Deployment",
    "Event",
    "Incident",
    "IncidentPage",
    "Instance",
    "InstancePage",
    "InstanceStatus",
    "NodeCount",
    "QueueInfo",
    "Started",
    "Token",
    "TokenState",
    "WorkerInfo",
]


class InstanceStatus(StrEnum):
    """An instance's state; RUNNING moves to exactly one of the three final ones."""

    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"

    @property
    def finished(self) -> bool:
        return self is not InstanceStatus.RUNNING


class TokenState(StrEnum):
    READY = "READY"  # waiting for a worker
    LEASED = "LEASED"  # leased to one worker
    WAITING = "WAITING"  # on a timer or a child instance
    AWAITING = "AWAITING"  # on a signal
    JOINED = "JOINED"  # at a barrier
    DONE = "DONE"  # finished


@dataclass(frozen=True)
class Deployment:
    name: str
    version: str  # "sha256:<64 hex>"
    created: bool  # False: that version was already registered


@dataclass(frozen=True)
class Definition:
    name: str
    version: str
    canonical: bytes  # the hashed canonical JSON, byte for byte
    registered_at_ms: int

    @property
    def graph(self) -> Any:
        import orjson

        return orjson.loads(self.canonical)


@dataclass(frozen=True)
class Started:
    instance_id: str
    version: str
    created: bool  # False: an instance with that id already existed
    eager: bool = False  # the first task went straight to the in-process worker


@dataclass(frozen=True)
class Token:
    token_id: str
    node_id: str
    state: TokenState
    attempt: int
    lease_owner: str
    lease_expires_at_ms: int
    wake_at_ms: int
    branch: str
    context: Any = None  # this token's context (describe only)
    queue: str = ""  # READY / LEASED: the step's queue
    activity: str = ""  # READY / LEASED: the step's activity
    wait_kind: str = ""  # WAITING: sleep | retry | child | held
    child_instance_id: str = ""
    ready_at_ms: int = 0
    parent_token_id: str = ""
    explanation: str = ""  # one sentence: what it waits for and why (docs/operations.md)


@dataclass(frozen=True)
class Event:
    seq: int
    at_ms: int
    kind: str  # step_started, step_completed, step_failed, ...
    node_id: str
    attempt: int
    detail: Any  # JSON value (None when there is none)


@dataclass(frozen=True)
class Instance:
    instance_id: str
    flow: str
    version: str
    status: InstanceStatus
    # The latest committed context: the final one once finished; while running, that of the
    # token that moved last (a listed instance carries its start input instead).
    context: Any
    reason: str
    execution_mode: str  # SERVER, LOCAL_SYNC or LOCAL_ASYNC
    parent_instance_id: str
    created_at_ms: int
    updated_at_ms: int
    tokens: list[Token] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    input: Any = None  # the start input
    child_instance_ids: list[str] = field(default_factory=list)  # subflow children, oldest first
    current_node: str = ""  # the node of the token that moved last
    search: dict[str, Any] = field(default_factory=dict)  # its search attribute values
    # describe with events: node id -> {"context", "at_ms"[, "input"]}, what each top-level node
    # received the last time it was entered (what `reset` to it rewinds to)
    step_inputs: dict[str, Any] = field(default_factory=dict)
    # who started it (the starting credential's name); "" when no person did (a schedule)
    started_by: str = ""
    # Its trace's id (docs/observability.md); "" from a server that predates tracing.
    trace_id: str = ""


class InstancePage(list[Instance]):
    """One page of `list_instances`: a list, newest first, plus where the next page starts
    (`next_page_token`, "" on the last page) and, when asked for, counts per status."""

    def __init__(
        self,
        instances: list[Instance] | None = None,
        next_page_token: str = "",
        counts: dict[str, int] | None = None,
    ) -> None:
        super().__init__(instances or [])
        self.next_page_token = next_page_token
        self.counts: dict[str, int] = counts or {}


@dataclass(frozen=True)
class DefinitionSummary:
    name: str
    version: str
    registered_at_ms: int
    execution_mode: str  # as declared: SERVER, LOCAL_SYNC, LOCAL_ASYNC or DEFAULT
    instance_counts: dict[str, int]  # status -> instances on this version (when asked for)


@dataclass(frozen=True)
class QueueInfo:
    """A queue with work on it (`list_queues`)."""

    queue: str
    ready: int  # tasks waiting for a worker
    oldest_ready_at_ms: int  # since when the oldest of them waits (0: none)
    leased: int  # tasks leased to a worker now


@dataclass(frozen=True)
class NodeCount:
    """How many instances of a version stand at a node in a token state, or failed there
    (state FAILED) (`node_counts`)."""

    node_id: str
    state: str
    instances: int


@dataclass(frozen=True)
class Incident:
    """FAILED instances of one flow that failed at the same node for the same reason."""

    flow: str
    node_id: str  # "" when the reason names no node
    reason: str
    instances: int
    first_failed_at_ms: int
    last_failed_at_ms: int
    instance_ids: list[str]  # the newest few


@dataclass(frozen=True)
class IncidentPage:
    incidents: list[Incident]  # the largest group first
    failed: int  # FAILED instances matching in all


@dataclass(frozen=True)
class WorkerInfo:
    worker_id: str
    queues: list[str]
    activities: list[str]  # empty: the worker did not say (it takes any activity)
    slots: int
    sdk: str
    first_seen_ms: int
    last_poll_ms: int
