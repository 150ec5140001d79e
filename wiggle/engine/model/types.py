"""The engine's vocabulary: state enums and the plain records its API takes and returns.

A new field of `InstanceView` or `TokenView` also goes into the proto, the server's conversion
and the client's records (docs/internals.md, "Where an instance or token view lives").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from wiggle._limits import quote
from wiggle.errors import PermissionDenied
from wiggle.filters import Condition
from wiggle.graph import ExecutionMode, Graph

__all__ = [
    "AdvanceResult",
    "DefinitionSummary",
    "EagerRequest",
    "EventView",
    "HeartbeatResult",
    "InstanceFilter",
    "InstancePage",
    "InstanceStatus",
    "InstanceView",
    "Json",
    "QueueGrant",
    "Report",
    "ReportKind",
    "StartResult",
    "StepFailure",
    "StepOutcome",
    "StoredDefinition",
    "TaskActivation",
    "TokenState",
    "TokenView",
    "WorkerSeen",
]

Json = Any


class InstanceStatus(StrEnum):
    """Where an instance is in its life.

    Legal transitions: RUNNING -> COMPLETED | FAILED | CANCELLED. The three others are final.
    """

    RUNNING = "RUNNING"  # at least one token is live
    COMPLETED = "COMPLETED"  # reached the end, or a top-level filter was false (reason "filtered")
    FAILED = "FAILED"  # a step failed for good, a loop ran over, a child failed, bad data
    CANCELLED = "CANCELLED"  # cancelled by a user (or with its cancelled parent)


class TokenState(StrEnum):
    """Where one token is.

    Legal transitions (every state may also go to DONE when its instance finishes):
        READY -> LEASED                       a worker claims it
        LEASED -> READY | WAITING | AWAITING | JOINED | DONE | LEASED (next node, same run)
        LEASED -> WAITING                     a failed attempt waits for its retry
        WAITING -> READY | AWAITING | ...     the timer fired / the child finished / released
        AWAITING -> READY | ...               the signal arrived or the timeout fired
        JOINED -> READY | DONE                a fork parent runs its combine; a branch is merged
    """

    READY = "READY"  # waiting for a worker to claim it
    LEASED = "LEASED"  # leased to one worker (RUNNING on the wire)
    WAITING = "WAITING"  # on a timer (sleep, retry backoff), a child instance, or held back
    AWAITING = "AWAITING"  # on a signal (possibly with a timeout)
    JOINED = "JOINED"  # a branch arrived at its join, or a fork parent waits for its branches
    DONE = "DONE"  # finished; kept for the record


@dataclass(frozen=True)
class StoredDefinition:
    name: str
    version: str
    canonical: bytes
    registered_at_ms: int
    flow: Any  # wiggle.compiler.CompiledFlow (imported lazily: the engine works without it)


@dataclass(frozen=True)
class EagerRequest:
    """Lease a task to this worker in the same transaction (docs/worker-protocol.md, "Eager
    dispatch"): the first task of a new instance, or the next task after a CompleteTask."""

    worker_id: str
    queues: Sequence[str]
    activities: Sequence[str] = ()  # empty: any activity


@dataclass(frozen=True)
class TaskActivation:
    """One claimed task, as the wire's `Task` with `input` a JSON value."""

    task_id: str
    lease: str
    lease_expires_at_ms: int
    instance_id: str
    flow: str
    version: str
    node_id: str
    activity: str
    queue: str
    attempt: int
    input: Json
    execution_mode: ExecutionMode
    loop_counts: Mapping[str, int]
    timeout_ms: int
    # The trace the task's instance tree is in (docs/observability.md): its root, and the trace
    # context its start carried ("" when none, or when the engine was not asked for it).
    root_id: str = ""
    traceparent: str = ""
    tracestate: str = ""

    @property
    def server_now_ms(self) -> int:
        """The database clock when the lease was issued (a lease runs `timeout_ms` from then)."""
        return self.lease_expires_at_ms - self.timeout_ms


@dataclass(frozen=True)
class StartResult:
    instance_id: str
    version: str
    created: bool
    eager_task: TaskActivation | None = None


@dataclass(frozen=True)
class StepFailure:
    message: str
    non_retryable: bool = False
    error_type: str = ""


_UNSET: Any = object()


@dataclass(frozen=True)
class StepOutcome:
    """One step a worker ran: exactly one of `context`, `predicate`, `failure` is given."""

    node_id: str
    context: Json = _UNSET
    predicate: bool | None = None
    failure: StepFailure | None = None

    @property
    def has_context(self) -> bool:
        return self.context is not _UNSET


class ReportKind(StrEnum):
    """What a worker reports about a leased task."""

    COMPLETE = "complete"  # CompleteTask: the one step's result
    FAIL = "fail"  # FailTask: the one step failed
    ADVANCE = "advance"  # AdvanceRun: a batch of locally run steps
    RELEASE = "release"  # ReleaseTask: given back unrun


@dataclass(frozen=True)
class QueueGrant:
    """The queues the sender of a report may touch (a `worker:QUEUES` credential's), checked in
    the report's own transaction; `holder` names the sender in a refusal."""

    queues: frozenset[str]
    holder: str

    def check(self, queue: str, what: str) -> None:
        """PermissionDenied unless `queue` is one of the granted queues."""
        if queue not in self.queues:
            raise PermissionDenied(f"{self.holder} may not {what} queue {quote(queue)}")


@dataclass(frozen=True)
class Report:
    """One report on a leased task: its identity (task, lease, seq) and what it says.

    `seq` numbers the reports under one lease from 1; 0 means the worker sent no identity.
    `grant` None: the sender may report on any queue.
    """

    kind: ReportKind
    task_id: str
    lease: str
    seq: int = 0
    result: Json = None  # COMPLETE
    failure: StepFailure | None = None  # FAIL
    steps: Sequence[StepOutcome] = ()  # ADVANCE
    final: bool = True  # ADVANCE: hand back (the others always do)
    reason: str = ""  # ADVANCE, RELEASE: why the worker stopped
    next: EagerRequest | None = None  # COMPLETE: lease the instance's next task to the worker
    grant: QueueGrant | None = None


@dataclass(frozen=True)
class AdvanceResult:
    """The answer to a report."""

    instance_status: InstanceStatus
    lease_expires_at_ms: int
    keep_going: bool
    server_now_ms: int = 0
    duplicate: bool = False  # a resent report answered again, not applied a second time
    next_task: TaskActivation | None = None  # COMPLETE with `next`: the task leased next


@dataclass(frozen=True)
class HeartbeatResult:
    lease_expires_at_ms: int
    instance_status: InstanceStatus
    server_now_ms: int = 0


@dataclass(frozen=True)
class TokenView:
    token_id: str
    node_id: str
    state: TokenState
    attempt: int
    lease_owner: str
    lease_expires_at_ms: int
    wake_at_ms: int
    branch: str
    parent_token_id: str
    # What `describe` adds (list views leave the defaults).
    context: Json = None
    queue: str = ""  # READY / LEASED: the step's queue
    activity: str = ""  # READY / LEASED: the step's activity
    wait_kind: str = ""  # WAITING: sleep | retry | child | held
    child_instance_id: str = ""
    ready_at_ms: int = 0
    explanation: str = ""  # one sentence: what the token waits for (engine/reads/explain.py)


@dataclass(frozen=True)
class EventView:
    seq: int
    at_ms: int
    kind: str
    node_id: str
    attempt: int
    detail: Json


@dataclass(frozen=True)
class InstanceView:
    instance_id: str
    flow: str
    version: str
    status: InstanceStatus
    # The latest committed context: the final one once finished; while running, that of the
    # token that moved last (`describe`; a list view carries the input instead).
    context: Json
    reason: str
    execution_mode: ExecutionMode
    parent_instance_id: str
    created_at_ms: int
    updated_at_ms: int
    tokens: list[TokenView] = field(default_factory=list)
    events: list[EventView] = field(default_factory=list)
    input: Json = None  # the start input (`describe` of a RUNNING instance; else None)
    child_instance_ids: list[str] = field(default_factory=list)  # subflow children, oldest first
    current_node: str = ""  # the node of the token that moved last
    search: dict[str, Json] = field(default_factory=dict)  # search attribute values it has
    # `describe` with events: node id -> {"context", "at_ms"[, "input"]}, what each top-level
    # node received the last time a token entered it (what a reset to it rewinds to).
    step_inputs: dict[str, Json] = field(default_factory=dict)
    # Who started it (a credential's name; a subflow child: its parent's); "" when no person
    # did (a schedule's fire, a server without credentials).
    started_by: str = ""
    # Its tree's trace (32 hex digits): its start's traceparent, or derived from the root id.
    trace_id: str = ""


@dataclass(frozen=True)
class InstanceFilter:
    """What `Engine.find_instances` selects; every field optional."""

    flow: str | None = None
    version: str | None = None
    status: InstanceStatus | None = None
    started_after_ms: int | None = None  # created_at_ms >= this
    started_before_ms: int | None = None  # created_at_ms < this
    id_contains: str | None = None
    # Conditions of the filter language (wiggle.filters), all of which must hold.
    where: tuple[Condition, ...] = ()


@dataclass(frozen=True)
class InstancePage:
    """One page of instances, newest first; `next_page_token` is "" on the last page."""

    instances: list[InstanceView]
    next_page_token: str
    counts: dict[str, int]  # status -> instances matching the filter without its status


@dataclass(frozen=True)
class DefinitionSummary:
    name: str
    version: str
    registered_at_ms: int
    execution_mode: ExecutionMode  # as declared (DEFAULT is not resolved)
    instance_counts: dict[str, int]  # status -> instances on this version (when asked for)


@dataclass(frozen=True)
class WorkerSeen:
    """A worker as the server last recorded it (written at most every few seconds)."""

    worker_id: str
    queues: tuple[str, ...]
    activities: tuple[str, ...]  # empty: the worker did not say (any activity)
    slots: int
    sdk: str
    first_seen_ms: int
    last_poll_ms: int


def resolve_mode(graph: Graph, default: ExecutionMode) -> ExecutionMode:
    """The definition's mode wins; DEFAULT defers to the server's; DEFAULT there means SERVER."""
    if graph.execution is not ExecutionMode.DEFAULT:
        return graph.execution
    return default if default is not ExecutionMode.DEFAULT else ExecutionMode.SERVER
