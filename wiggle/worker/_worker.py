"""`Worker`: serves queues, runs tasks with a concurrency limit, drains on stop."""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any

import grpc

from wiggle._connection import connection, explicit_tls
from wiggle._metrics import MetricsEndpoint
from wiggle._proto.wiggle.v1 import wiggle_pb2 as pb
from wiggle._proto.wiggle.v1 import wiggle_pb2_grpc as pb_grpc
from wiggle._version import __version__
from wiggle.graph import Graph
from wiggle.traversal import Handback
from wiggle.wire import TlsConfig, open_channel
from wiggle.worker._activities import Registry, default_registry
from wiggle.worker._definitions import DefinitionCache
from wiggle.worker._eager import EagerSlot, Slots
from wiggle.worker._heartbeat import Lease, LeaseKeeper
from wiggle.worker._local_run import RunEnv, hold_lease, run_task
from wiggle.worker._poller import Poller
from wiggle.worker._reporting import release
from wiggle.worker._rpc import Rpc

if TYPE_CHECKING:
    from wiggle.worker._metrics import WorkerMetrics

__all__ = ["TlsConfig", "Worker", "open_channel"]

_log = logging.getLogger("wiggle.worker")


class Worker:
    """Pulls tasks from the queues it serves and runs their activities.

    SERVER tasks run one step and report it; LOCAL_SYNC / LOCAL_ASYNC tasks start a local run
    (see `wiggle.worker._local_run`). `stop()` drains: the open poll is ended on the server
    (EndPolls) rather than cancelled, tasks received but not started are released unrun
    (ReleaseTask, no attempt consumed), local runs hand back at their next step boundary with
    whatever they buffered, and steps already running finish and are reported before it
    returns.

    `address`, `token` (or `token_file`) and `tls` left unset come from the `WIGGLE_*`
    connection variables (docs/worker-protocol.md, "Connection"), read here so that a bad one
    fails at once; `tls=False` is plaintext whatever they say.
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        queues: Iterable[str] = ("default",),
        registry: Registry | None = None,
        activities: Registry | None = None,
        concurrency: int = 16,
        local_batch_size: int = 64,
        token: str | None = None,
        token_file: str | None = None,
        worker_id: str | None = None,
        tls: TlsConfig | bool | None = None,
        poll_wait_ms: int = 10_000,
        stub: Any = None,
        metrics_address: str | None = None,
    ) -> None:
        if registry is not None and activities is not None and registry is not activities:
            raise TypeError("pass the handlers as `registry` or as `activities`, not both")
        if isinstance(queues, str):
            queues = (queues,)
        explicit = replace(explicit_tls(tls), address=address, token=token, token_file=token_file)
        conn = connection(explicit)
        self.address = conn.address
        self.queues: tuple[str, ...] = tuple(queues)
        if not self.queues:
            raise ValueError("a worker needs at least one queue")
        self.registry: Registry = registry or activities or default_registry
        self.concurrency = concurrency
        self.local_batch_size = local_batch_size
        self.worker_id: str = (
            worker_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        )
        self._token = conn.token
        self._tls: TlsConfig | bool = conn.tls or False
        self._poll_wait_ms = poll_wait_ms
        self._stub_override = stub  # tests inject an in-memory stub
        self._metrics_address = metrics_address  # HOST:PORT of the Prometheus endpoint
        self.metrics: WorkerMetrics | None = None
        self._endpoint: MetricsEndpoint | None = None
        self._slots = Slots(concurrency)
        self._lock = threading.Lock()
        self._state = "new"  # new -> running -> stopping -> stopped
        self._channel: grpc.Channel | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._poller: Poller | None = None
        self._keeper: LeaseKeeper | None = None
        self._env: RunEnv | None = None
        self._stopped = threading.Event()
        self._seed: list[Graph] = []
        self._tracing: Any = None  # wiggle.tracing._sdk.Sdk while tracing is on

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        with self._lock:
            if self._state != "new":
                raise RuntimeError(f"worker is {self._state}; a Worker starts once")
            self._state = "running"
        stub = self._stub_override
        if stub is None:
            self._channel = open_channel(self.address, self._tls)
            stub = pb_grpc.WiggleStub(self._channel)  # type: ignore[no-untyped-call]
        # Reports of concurrent tasks share ReportBatch calls; not with a test's stand-in stub.
        rpc = Rpc(
            stub,
            address=self.address,
            token=self._token,
            batch_reports=self._stub_override is None,
        )
        if self._metrics_address is not None:
            # Imported here: prometheus_client (and http.server with it) is a fifth of a
            # worker's start, and most workers serve no metrics.
            from wiggle.worker._metrics import WorkerMetrics

            self.metrics = WorkerMetrics()
            self._endpoint = MetricsEndpoint(self._metrics_address, self.metrics.registry)
            rpc.observer = self.metrics.call
        definitions = DefinitionCache(rpc)
        for graph in self._seed:
            definitions.put(graph)
        self._keeper = LeaseKeeper(rpc)
        tracer = self._start_tracing()
        self._env = RunEnv(
            rpc=rpc,
            registry=self.registry,
            queues=self.queues,
            definitions=definitions,
            keeper=self._keeper,
            local_batch_size=self.local_batch_size,
            worker_id=self.worker_id,
            tracer=tracer,
        )
        # Exactly `concurrency` threads: a task beyond that (a poll racing an eager reservation,
        # see _poller) waits in the pool's queue, its lease kept alive from the moment it came.
        self._executor = ThreadPoolExecutor(self.concurrency, thread_name_prefix="wiggle-task")
        self._keeper.start()
        self._poller = Poller(
            rpc,
            self._slots,
            self._submit,
            worker_id=self.worker_id,
            queues=self.queues,
            wait_ms=self._poll_wait_ms,
            activities=self.registry.names,
            capacity=self.concurrency,
            sdk=f"wiggle-python/{__version__}",
            on_poll=self.metrics.poll if self.metrics is not None else None,
        )
        self._poller.start()
        _log.info("worker %s serving %s at %s", self.worker_id, ",".join(self.queues), self.address)

    def stop(self, drain: bool = True) -> None:
        """Stop the worker. `drain`: hand back local runs and finish running steps first.

        Without `drain` the worker behaves like a crash for whatever it holds: buffered LOCAL_ASYNC
        results are dropped and the leases expire. Idempotent.
        """
        with self._lock:
            if self._state in ("stopping", "stopped"):
                state = self._state
            else:
                state, self._state = self._state, "stopping"
        if state == "stopped":
            return
        if state == "stopping":  # another thread is stopping it: wait for that to finish
            self._stopped.wait()
            return
        if state == "new":
            self._finish_stop()
            return
        assert self._env is not None and self._executor is not None
        if drain:
            self._env.draining.set()
        else:
            self._env.aborted.set()
            self._env.rpc.stopped.set()
        if self._poller is not None:
            self._poller.stop()
        # Ordering: the poller is stopped before the pool shuts down, so no new task arrives
        # after this point except an eager dispatch racing us, which the shut pool refuses.
        self._executor.shutdown(wait=drain, cancel_futures=not drain)
        self._finish_stop()
        _log.info("worker %s stopped", self.worker_id)

    def _start_tracing(self) -> Any:
        """A StepTracer when the OTEL_* variables turn tracing on; None (and no OpenTelemetry
        import) otherwise."""
        from wiggle.tracing import enabled

        if not enabled():
            return None
        from wiggle.tracing._sdk import Sdk
        from wiggle.tracing._steps import StepTracer

        metrics = self.metrics
        self._tracing = Sdk(
            "worker",
            on_dropped=(lambda n: metrics.spans_dropped.inc(n)) if metrics is not None else None,
        )
        return StepTracer(self._tracing)

    @property
    def metrics_port(self) -> int:
        """The bound port of the metrics endpoint (0 when there is none)."""
        return self._endpoint.port if self._endpoint is not None else 0

    def _finish_stop(self) -> None:
        if self._tracing is not None:
            self._tracing.shutdown()  # spans still buffered go out (two seconds at most)
        if self._endpoint is not None:
            self._endpoint.close()
        if self._keeper is not None:
            self._keeper.stop()
        if self._channel is not None:
            self._channel.close()
        with self._lock:
            self._state = "stopped"
        self._stopped.set()

    def run(self) -> None:
        """Start, serve until SIGTERM or SIGINT, then drain and return.

        A second signal while draining stops without draining (like a crash for what is held).
        """
        wake = threading.Event()
        signals = 0

        def on_signal(signum: int, frame: FrameType | None) -> None:
            nonlocal signals
            signals += 1
            if signals > 1 and self._env is not None:
                self._env.aborted.set()
                self._env.rpc.stopped.set()
            wake.set()

        previous: dict[signal.Signals, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGINT):
                previous[signum] = signal.signal(signum, on_signal)
        try:
            self.start()
            while not wake.wait(0.5):
                if self._stopped.is_set():
                    break
            self.stop(drain=True)
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def __enter__(self) -> Worker:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop(drain=True)

    # -- state -------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._state == "running"

    @property
    def free_slots(self) -> int:
        return max(0, self._slots.free)

    def add_definition(self, graph: Graph) -> None:
        """Give the worker a compiled graph up front (saves a GetDefinition per version)."""
        if self._env is not None:
            self._env.definitions.put(graph)
        else:
            self._seed.append(graph)

    # -- tasks -------------------------------------------------------------------------------

    def reserve_eager_slot(self) -> EagerSlot | None:
        """Reserve a slot for a task an eager start will hand back (eager dispatch,
        docs/worker-protocol.md).

        None when the worker is not running, is shutting down, cannot reach the server right
        now, or has no free slot: the caller then starts the instance without eager dispatch.
        """
        if not self.running or (self._env is not None and self._env.rpc.outage.down):
            return None
        if self._slots.take(1) != 1:
            return None
        if not self.running:  # stop() began between the check and the take
            self._slots.give(1)
            return None
        return EagerSlot(self._submit, self._slots.give)

    def _submit(self, task: pb.Task) -> bool:
        """Run `task` on a slot the caller already holds; False when the pool is shut."""
        executor, env = self._executor, self._env
        if executor is None or env is None or self._state == "stopped":
            return False
        lease = hold_lease(env, task)
        try:
            executor.submit(self._run_on_slot, env, task, lease)
        except RuntimeError:  # the pool shut down under us: give the task back unrun
            if env.keeper is not None:
                env.keeper.drop(lease)
            if not env.aborted.is_set():
                release(env.rpc, lease, str(Handback.SHUTDOWN))
            return False
        return True

    def _run_on_slot(self, env: RunEnv, task: pb.Task, lease: Lease) -> None:
        try:
            run_task(env, task, lease)
        finally:
            self._slots.give(1)
