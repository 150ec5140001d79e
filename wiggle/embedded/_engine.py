"""`Engine`: a Wiggle node and a worker inside the application's process (docs/embedded.md)."""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Iterable
from contextlib import ExitStack
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from wiggle.client import Client, Deployment, Instance, InstanceStatus, Started
from wiggle.engine import Engine as Core
from wiggle.graph import ExecutionMode
from wiggle.server import InProcessStub, Server, ServerConfig
from wiggle.worker import Registry, Worker, default_registry

if TYPE_CHECKING:
    from wiggle.compiler import CompiledFlow

__all__ = ["IN_PROCESS", "Engine", "in_process_worker"]

_log = logging.getLogger("wiggle.embedded")

#: What messages call the node's services when no port is open (in place of an address).
IN_PROCESS = "in-process"


def in_process_worker(
    stub: Any,
    *,
    queues: Iterable[str],
    registry: Registry,
    concurrency: int = 16,
    local_batch_size: int = 64,
    **options: Any,
) -> Worker:
    """The worker an embedded node runs (not started): `registry`'s handlers on `queues`,
    calling the node through `stub` (an InProcessStub of its service). The conformance runner's
    embedded worker is this one, with the recorder on its stub. `options`: the rest of
    Worker's (poll_wait_ms, ...)."""
    return Worker(
        IN_PROCESS,
        queues=tuple(queues),
        registry=registry,
        concurrency=concurrency,
        local_batch_size=local_batch_size,
        worker_id=f"embedded:{os.getpid()}:{os.urandom(4).hex()}",
        stub=stub,
        tls=False,
        **options,
    )


class Engine:
    """Wiggle in this process: the engine over `database`, its services called directly (no
    gRPC, no socket), and a worker running `activities` here.

        with Engine("sqlite:///orders.db", activities=registry) as wiggle:
            wiggle.deploy("order.yaml")
            result = wiggle.run("order", {"id": 7})

    It is one more stateless node of the database: its own leader election, timers and lease
    expiry, and, with `listen` (`host:port`), the gRPC API for remote workers in any language,
    the CLI, the console and other servers on the same database. The durability contract is
    the same as a server's: a SERVER or LOCAL_SYNC step is committed before the next one runs;
    a process killed mid-run loses what the mode allows (README, "Execution modes"), and a
    node on the database (this one restarted, or another) runs the rest once the leases
    expire.

    `database`: a SQLAlchemy URL (`sqlite:///FILE`, `postgresql://...`); None is an SQLite
    file in a temporary directory, removed by `close()`. `activities`: the handlers
    (`wiggle.worker.Registry`; None is the module-level `@activity` registry). `queues`: what
    the worker here serves (default `default`). `worker=False`: no worker here (remote ones
    only). The rest as `wiggle server` and `wiggle worker` take them.
    """

    def __init__(
        self,
        database: str | None = None,
        *,
        activities: Registry | None = None,
        queues: Iterable[str] = ("default",),
        concurrency: int = 16,
        default_mode: ExecutionMode | str = ExecutionMode.SERVER,
        database_profile: str = "default",
        listen: str | None = None,
        token: str | None = None,
        worker: bool = True,
        local_batch_size: int = 64,
        grace_s: float = 2.0,
        **server_config: Any,
    ) -> None:
        # What opens is closed again, in reverse, if a later part fails to open.
        with ExitStack() as stack:
            if database is None:
                tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="wiggle-"))
                database = f"sqlite:///{Path(tmp) / 'wiggle.db'}"
            self.database = database
            self.core = Core(
                database,
                default_mode=ExecutionMode(default_mode),
                database_profile=database_profile,
            )
            stack.callback(self.core.close)
            config = ServerConfig(
                address=listen or "127.0.0.1:0", token=token, grace_s=grace_s, **server_config
            )
            self.server = Server(self.core, config)
            self.server.start(listen=listen is not None)
            stack.callback(self.server.stop)
            #: The host:port remote callers reach this node at (None: nothing listens).
            self.address: str | None = self.server.address if listen is not None else None
            self._stub = InProcessStub(self.server.service)
            admin = InProcessStub(self.server.admin)
            #: Every call of the Wiggle and WiggleAdmin APIs, in process (wiggle.client.Client).
            self.client = Client.over_stubs(
                self._stub, admin, label=f"the embedded node {database}"
            )
            #: The worker running the handlers here (None with `worker=False`).
            self.worker: Worker | None = None
            if worker:
                self.worker = in_process_worker(
                    self._stub,
                    queues=queues,
                    registry=activities or default_registry,
                    concurrency=concurrency,
                    local_batch_size=local_batch_size,
                )
                self.worker.start()
                stack.callback(self.worker.stop)
            _log.info(
                "wiggle embedded on %s%s",
                database,
                f", listening on {self.address}" if self.address else "",
            )
            self._stack = stack.pop_all()

    # -- the application's calls -----------------------------------------------------------

    def deploy(self, flow: str | os.PathLike[str] | bytes | CompiledFlow) -> Deployment:
        """Register a flow (a YAML/JSON file's path, its text as bytes, or a CompiledFlow);
        registering a version that exists is a no-op (`created` False)."""
        return self.client.deploy(flow)

    def start(
        self,
        flow: str,
        input: Any = None,
        *,
        version: str | None = None,
        instance_id: str | None = None,
    ) -> Started:
        """Start an instance of `flow` (its newest version unless `version`); its first task
        goes straight to the worker here when it has a free slot and serves the task's queue.
        With `instance_id`, starting again the same id is a no-op (`created` False)."""
        return self.client.start(
            flow, input, version=version, instance_id=instance_id, worker=self.worker
        )

    def wait(self, instance_id: str, timeout: float | None = None) -> Instance:
        """The instance once it is no longer RUNNING; TimeoutError after `timeout` seconds."""
        return self.client.wait(instance_id, timeout)

    def run(
        self,
        flow: str,
        input: Any = None,
        *,
        timeout: float | None = None,
        instance_id: str | None = None,
    ) -> Instance:
        """Start an instance and wait for its end (`status`, `context`, `reason`)."""
        started = self.start(flow, input, instance_id=instance_id)
        return self.wait(started.instance_id, timeout)

    def signal(self, instance_id: str, name: str, payload: Any = None) -> bool:
        """Deliver signal `name` (buffered until an await takes it)."""
        return self.client.signal(instance_id, name, payload)

    def cancel(self, instance_id: str, reason: str = "") -> InstanceStatus:
        """Cancel the instance (its children too); its status after."""
        return self.client.cancel(instance_id, reason)

    def describe(self, instance_id: str, *, events: bool = False) -> Instance:
        """The instance now: status, context, tokens and what each waits for."""
        return self.client.describe(instance_id, events=events)

    # -- lifecycle ----------------------------------------------------------------------------

    def close(self) -> None:
        """Drain the worker (running steps finish and are reported, local runs hand back),
        stop the node, close the database. Idempotent."""
        self._stack.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
