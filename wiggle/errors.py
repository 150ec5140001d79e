"""Wiggle's errors: one small tree, each with a message a user can act on.

    WiggleError
    ├── FlowError                  a flow document could not be loaded, validated or compiled
    │                              (carries every Diagnostic, each with file, line and column)
    ├── NotFound                   a named thing does not exist
    │   ├── DefinitionNotFound     no registered flow with that name / version
    │   ├── InstanceNotFound       no instance with that id
    │   ├── BatchNotFound          no bulk action with that id
    │   └── ScheduleNotFound       no schedule with that name
    ├── InvalidRequest             a well-formed request that cannot be honoured as asked
    │   ├── InputRejected          a start input that fails the flow's `input` schema
    │   ├── SignalNotAwaited       a signal no `await` of the instance's flow can receive
    │   └── WrongPath              an AdvanceRun batch that does not follow the graph
    ├── Conflict                   the request was valid once but the world moved on
    │   ├── StaleLease             a report carrying a lease that is no longer the current one
    │   ├── ReportOutOfOrder       a report whose seq skips one the server has not applied
    │   ├── InstanceNotRunning     a signal, cancel or report for a finished instance
    │   ├── InstanceExists         a start with the id of an instance of another flow or input
    │   ├── RepairRefused          a retry, reset or migration the instance's state forbids
    │   └── TaskNotOpen            a human task that can no longer be acted on (answered, or
    │                              its step moved on)
    ├── PayloadTooLarge            a context or signal over the configured size limit
    ├── Unauthenticated            a missing or wrong bearer token
    ├── PermissionDenied           a credential whose scopes do not allow the call
    └── Unavailable                the server or database cannot be reached right now

The gRPC layer maps each branch to one status code (NOT_FOUND, INVALID_ARGUMENT,
FAILED_PRECONDITION, ALREADY_EXISTS, RESOURCE_EXHAUSTED, UNAUTHENTICATED, PERMISSION_DENIED,
UNAVAILABLE) and each class to a reason (`wiggle.wire.ERROR_TABLE`); the client maps them back,
so code on either side of the wire catches the same classes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "BatchNotFound",
    "Conflict",
    "DefinitionNotFound",
    "Diagnostic",
    "FlowError",
    "InputRejected",
    "InstanceExists",
    "InstanceNotFound",
    "InstanceNotRunning",
    "InvalidRequest",
    "NotFound",
    "PayloadTooLarge",
    "PermissionDenied",
    "RepairRefused",
    "ReportOutOfOrder",
    "ScheduleNotFound",
    "SignalNotAwaited",
    "StaleLease",
    "TaskNotOpen",
    "Unauthenticated",
    "Unavailable",
    "WiggleError",
    "WrongPath",
]


class WiggleError(Exception):
    """The root of every error Wiggle raises on purpose."""


@dataclass(frozen=True, order=True)
class Diagnostic:
    """One problem in a flow document, located as precisely as the source allows.

    `line` and `column` are 1-based. A problem with the document as a whole (unreadable, too
    large, not UTF-8) is placed at 1:1, where an editor can jump; 0 means no position is known
    (a graph handed over without its source). `path` is the JSON pointer of the offending value.
    """

    file: str
    line: int
    column: int
    message: str
    path: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}: {self.message}"


class FlowError(WiggleError):
    """A flow document was rejected; `diagnostics` lists every problem found, in source order."""

    def __init__(self, diagnostics: Sequence[Diagnostic]) -> None:
        self.diagnostics: tuple[Diagnostic, ...] = tuple(sorted(diagnostics))
        super().__init__("\n".join(str(d) for d in self.diagnostics))


class NotFound(WiggleError):
    """A named thing does not exist."""


class DefinitionNotFound(NotFound):
    def __init__(self, name: str, version: str | None = None) -> None:
        self.name = name
        self.version = version
        what = f"flow {name!r}" + (f" at version {version}" if version else "")
        super().__init__(f"{what} is not registered; deploy it first (wiggle deploy FLOW)")


class InstanceNotFound(NotFound):
    def __init__(self, instance_id: str) -> None:
        self.instance_id = instance_id
        super().__init__(f"no instance with id {instance_id!r}")


class BatchNotFound(NotFound):
    """No bulk action (or migration batch) with the id asked for."""


class ScheduleNotFound(NotFound):
    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"no schedule named {name!r} (wiggle schedule list shows them)")


class InvalidRequest(WiggleError):
    """A well-formed request that cannot be honoured as asked."""


class InputRejected(InvalidRequest):
    """The start input does not satisfy the flow's `input` schema."""


class SignalNotAwaited(InvalidRequest):
    """A signal whose name no `await` in the instance's flow takes: it could never land."""

    def __init__(self, instance_id: str, name: str, awaited: Sequence[str]) -> None:
        self.instance_id = instance_id
        self.name = name
        self.awaited = tuple(awaited)
        takes = (
            "it awaits " + ", ".join(f"{a!r}" for a in self.awaited)
            if self.awaited
            else "its flow has no await"
        )
        super().__init__(
            f"instance {instance_id!r} can never receive signal {name[:80]!r}: {takes}"
        )


class WrongPath(InvalidRequest):
    """A batch of step results that does not follow the graph from the leased token."""


class Conflict(WiggleError):
    """The request was valid once, but the state it refers to has moved on."""


class StaleLease(Conflict):
    def __init__(self, task_id: str, detail: str = "") -> None:
        self.task_id = task_id
        msg = f"the lease on task {task_id!r} is no longer held by this worker"
        super().__init__(f"{msg}: {detail}" if detail else msg)


class ReportOutOfOrder(Conflict):
    """A report's seq is more than one past the last report applied under its lease."""

    def __init__(self, task_id: str, seq: int, last: int) -> None:
        self.task_id = task_id
        super().__init__(
            f"report {seq} on task {task_id!r} skips ahead: the last report applied under this "
            f"lease is {last}; resend report {last + 1} (a resend keeps its seq)"
        )


class InstanceNotRunning(Conflict):
    def __init__(self, instance_id: str, status: str) -> None:
        self.instance_id = instance_id
        self.status = status
        super().__init__(f"instance {instance_id!r} is {status}, not RUNNING")


class InstanceExists(Conflict):
    """A start that names the id of an existing instance of another flow, or of the same flow
    started with another input (the same flow and input is an idempotent no-op)."""


class RepairRefused(Conflict):
    """A retry, reset or migration that the instance's present state does not allow; the
    message names the instance and says what would be allowed instead."""


class TaskNotOpen(Conflict):
    """A human task that can no longer be claimed or answered: it was completed (the message
    says by whom and when), or its step moved on without it (the deadline passed, the instance
    was cancelled, reset or migrated). On the wire it is a FAILED_PRECONDITION (the Conflict
    row of wiggle.wire.ERROR_TABLE); `task_id` and `state` are kept on this side only."""

    def __init__(self, task_id: str, state: str, message: str) -> None:
        self.task_id = task_id
        self.state = state
        super().__init__(message)


class PayloadTooLarge(WiggleError):
    """A context or signal payload over the configured size limit."""


class Unauthenticated(WiggleError):
    """A missing or wrong bearer token."""


class PermissionDenied(WiggleError):
    """The caller's credential is valid but its scopes do not allow this call."""


class Unavailable(WiggleError):
    """The server or the database cannot be reached right now; retrying later may succeed."""
