"""An embedded stack: an Engine, a Server on a loopback port over it, and a Client of that
server, started together and stopped in reverse order. `wiggle run`, the conformance runner and
the tests build their in-process Wiggle with it."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wiggle.engine import Engine
from wiggle.graph import ExecutionMode
from wiggle.server._server import Server, ServerConfig

if TYPE_CHECKING:
    from wiggle.client import Client

__all__ = ["EmbeddedStack", "embedded_stack"]


@dataclass(frozen=True)
class EmbeddedStack:
    engine: Engine
    server: Server
    client: Client

    @property
    def address(self) -> str:
        """`127.0.0.1:PORT` of the server."""
        return self.server.address


@contextmanager
def embedded_stack(
    database_url: str | None = None,
    *,
    default_mode: ExecutionMode = ExecutionMode.SERVER,
    token: str | None = None,
    grace_s: float = 1.0,
    interceptors: Sequence[Any] = (),
    client_retry_for: float = 10.0,
    database_profile: str = "default",
    **config: Any,
) -> Iterator[EmbeddedStack]:
    """Engine (an SQLite file in a temporary directory unless `database_url`), Server on
    127.0.0.1 and an ephemeral port, Client; all closed on exit, client first.

    `config` goes to ServerConfig (max_payload_bytes, metrics_address, ...)."""
    with ExitStack() as stack:
        if database_url is None:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="wiggle-"))
            database_url = f"sqlite:///{Path(tmp) / 'wiggle.db'}"
        engine = Engine(database_url, default_mode=default_mode, database_profile=database_profile)
        stack.callback(engine.close)
        server_config = ServerConfig(address="127.0.0.1:0", token=token, grace_s=grace_s, **config)
        server = Server(engine, server_config, interceptors=list(interceptors))
        server.start()
        stack.callback(server.stop)
        # Imported here: `wiggle server` imports this package and needs no client.
        from wiggle.client import Client

        client = Client(server.address, token=token, retry_for=client_retry_for)
        stack.callback(client.close)
        yield EmbeddedStack(engine, server, client)
