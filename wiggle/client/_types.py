"""What the client returns: plain dataclasses, never protobuf messages."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

__all__ = [
    "Definition",
    "Deployment",
    "Event",
    "Instance",
    "InstanceStatus",
    "Started",
    "Token",
    "TokenState",
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
    context: Any  # the final context once finished, else the input
    reason: str
    execution_mode: str  # SERVER, LOCAL_SYNC or LOCAL_ASYNC
    parent_instance_id: str
    created_at_ms: int
    updated_at_ms: int
    tokens: list[Token] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
