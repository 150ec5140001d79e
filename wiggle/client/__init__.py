"""Talk to a Wiggle server: deploy flows; start, signal, cancel, describe and wait for instances;
repair them (retry, reset, bulk actions); apply and run schedules; list and answer human
tasks."""

from __future__ import annotations

from wiggle.client._admin import Batch, BatchItem, BulkPreview, Repaired, describe_bulk_action
from wiggle.client._client import Client, EagerWorker
from wiggle.client._schedules import AppliedSchedule, BackfillPreview, ScheduleFire, ScheduleInfo
from wiggle.client._tasks import HumanTask, HumanTaskAction, TaskAnswer
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
from wiggle.wire import TlsConfig, open_channel, token_metadata

__all__ = [
    "AppliedSchedule",
    "BackfillPreview",
    "Batch",
    "BatchItem",
    "BulkPreview",
    "Client",
    "Definition",
    "DefinitionSummary",
    "Deployment",
    "EagerWorker",
    "Event",
    "HumanTask",
    "HumanTaskAction",
    "Incident",
    "IncidentPage",
    "Instance",
    "InstancePage",
    "InstanceStatus",
    "NodeCount",
    "QueueInfo",
    "Repaired",
    "ScheduleFire",
    "ScheduleInfo",
    "Started",
    "TaskAnswer",
    "TlsConfig",
    "Token",
    "TokenState",
    "WorkerInfo",
    "describe_bulk_action",
    "open_channel",
    "token_metadata",
]
