"""The gRPC server: Wiggle's wire protocol over one Engine (see _server for the design)."""

from __future__ import annotations

from wiggle.server._embedded import EmbeddedStack, embedded_stack
from wiggle.server._inprocess import InProcessRpcError, InProcessStub
from wiggle.server._server import Server, ServerConfig, ServerConfigError, serve

__all__ = [
    "EmbeddedStack",
    "InProcessRpcError",
    "InProcessStub",
    "Server",
    "ServerConfig",
    "ServerConfigError",
    "embedded_stack",
    "serve",
]
