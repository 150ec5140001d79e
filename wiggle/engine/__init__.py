"""The durable state machine: tokens, leases, timers, fork/join, signals, the leader.

`Engine` is the whole API (docs/internals.md); the records it takes and returns are below.
"""

from __future__ import annotations

from ._engine import Engine
from .model.clock import DEFAULT_START_MS, Clock, VirtualClock
from .model.data import MISSING, parse_instant_ms, resolve_pointer
from .model.types import (
    AdvanceResult,
    DefinitionSummary,
    EagerRequest,
    EventView,
    HeartbeatResult,
    InstanceFilter,
    InstancePage,
    InstanceStatus,
    InstanceView,
    Json,
    QueueGrant,
    Report,
    ReportKind,
    StartResult,
    StepFailure,
    StepOutcome,
    StoredDefinition,
    TaskActivation,
    TokenState,
    TokenView,
    WorkerSeen,
)
from .ops.prune import PruneResult
from .ops.repair import RepairResult
from .reads.overview import Incident, IncidentPage, NodeCount, QueueStats
from .reads.workers import WorkerNote
from .store.profile import DatabaseProfile
from .store.schema import SCHEMA_VERSION, IncompatibleSchema

__all__ = [
    "DEFAULT_START_MS",
    "MISSING",
    "SCHEMA_VERSION",
    "AdvanceResult",
    "Clock",
    "DatabaseProfile",
    "DefinitionSummary",
    "EagerRequest",
    "Engine",
    "EventView",
    "HeartbeatResult",
    "Incident",
    "IncidentPage",
    "IncompatibleSchema",
    "InstanceFilter",
    "InstancePage",
    "InstanceStatus",
    "InstanceView",
    "Json",
    "NodeCount",
    "PruneResult",
    "QueueGrant",
    "QueueStats",
    "RepairResult",
    "Report",
    "ReportKind",
    "StartResult",
    "StepFailure",
    "StepOutcome",
    "StoredDefinition",
    "TaskActivation",
    "TokenState",
    "TokenView",
    "VirtualClock",
    "WorkerNote",
    "WorkerSeen",
    "parse_instant_ms",
    "resolve_pointer",
]
