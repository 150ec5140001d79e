"""Wiggle: durable workflows where the workflow is data, not code.

The public surface: write handlers with `activity`, read step information with `step()`, mark a
failure final with `NonRetryable`, run them with `Worker`, talk to a server with `Client`, and
compile flows with `load_flow` / `load_flow_file`. Everything else is internal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wiggle._lazy import lazy_getattr
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

if TYPE_CHECKING:
    from wiggle.client import Client
    from wiggle.compiler import CompiledFlow, load_flow, load_flow_file
    from wiggle.worker import NonRetryable, Registry, StepInfo, Worker, activity, step

from wiggle._version import __version__

# The worker, client and compiler pull in grpc, jsonschema and networkx; they are imported on
# first use so that `import wiggle` (and every `wiggle` command) stays quick.
_LAZY = {
    "Client": "wiggle.client",
    "CompiledFlow": "wiggle.compiler",
    "load_flow": "wiggle.compiler",
    "load_flow_file": "wiggle.compiler",
    "NonRetryable": "wiggle.worker",
    "Registry": "wiggle.worker",
    "StepInfo": "wiggle.worker",
    "Worker": "wiggle.worker",
    "activity": "wiggle.worker",
    "step": "wiggle.worker",
}


__getattr__ = lazy_getattr(__name__, _LAZY)


__all__ = [
    "Client",
    "CompiledFlow",
    "Conflict",
    "DefinitionNotFound",
    "Diagnostic",
    "ExecutionMode",
    "FlowError",
    "InputRejected",
    "InstanceNotFound",
    "InstanceNotRunning",
    "InvalidRequest",
    "NonRetryable",
    "NotFound",
    "PayloadTooLarge",
    "Registry",
    "StaleLease",
    "StepInfo",
    "Unauthenticated",
    "Unavailable",
    "WiggleError",
    "Worker",
    "WrongPath",
    "__version__",
    "activity",
    "load_flow",
    "load_flow_file",
    "step",
]
