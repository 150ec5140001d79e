"""Talk to a Wiggle server: deploy flows; start, signal, cancel, describe and wait for instances."""

from __future__ import annotations

from wiggle.client._channel import TlsConfig, open_channel, token_metadata
from wiggle.client._client import Client, EagerWorker
from wiggle.client._types import (
    Definition,
    Deployment,
    Event,
    Instance,
    InstanceStatus,
    Started,
    Token,
    TokenState,
)

__all__ = [
    "Client",
    "Definition",
    "Deployment",
    "EagerWorker",
    "Event",
    "Instance",
    "InstanceStatus",
    "Started",
    "TlsConfig",
    "Token",
    "TokenState",
    "open_channel",
    "token_metadata",
]
