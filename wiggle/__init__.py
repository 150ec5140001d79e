"""Wiggle: durable workflows where the workflow is data, not code.

The public surface: write handlers with `activity`, read step information with `step()`, mark a
failure final with `NonRetryable`, run them with `Worker`, talk to a server with `Client`, and
compile flows with `load_flow` / `load_flow_file`. Everything else is internal.
"""

from __future__ import annotations

from wiggle.errors import (
    Conflict,
    DefinitionNotFound,
    Diagnostic,
    FlowError,
    InputRejected,
    InstanceNotFound,
    InstanceNotRunning,
    InvalidRequest,
    NotFound,
    PayloadTooLarge,
    StaleLease,
    Unauthenticated,
    Unavailable,
    WiggleError,
    WrongPath,
)
from wiggle.graph import ExecutionMode

__version__ = "0.1.0"

__all__ = [
    "Conflict",
    "DefinitionNotFound",
    "Diagnostic",
    "ExecutionMode",
    "FlowError",
    "InputRejected",
    "InstanceNotFound",
    "InstanceNotRunning",
    "InvalidRequest",
    "NotFound",
    "PayloadTooLarge",
    "StaleLease",
    "Unauthenticated",
    "Unavailable",
    "WiggleError",
    "WrongPath",
    "__version__",
]
# The worker SDK names (activity, step, NonRetryable, Worker), the Client and the compiler entry
# points are re-exported here once those packages exist; tests/unit/test_public_api.py pins them.
