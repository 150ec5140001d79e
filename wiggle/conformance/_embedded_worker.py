"""The embedded worker under test: the Python Worker inside the runner's own process, calling its
node's service in process (wiggle.embedded's layout), with the recorder on those calls.

`--worker embedded` runs the corpus so: no worker process and no gRPC between worker and node,
the calls going through an `InProcessStub` that applies the recorder as a server applies its
interceptors, so the runner judges and disturbs the embedded worker's calls as it does a remote
worker's. It offers what the runner asks of a worker process (`WorkerProcess`); the faults, which
the OS does to a process, it does to the worker's calls and steps:

- kill: an unclean death. From that moment no call of the worker reaches the node (each is
  answered UNAVAILABLE in this process, as a dead process's calls go nowhere), its open long poll
  counts as a dropped caller (the node hands back what it claims), and no step of it begins (an
  activity fails before it traces). Nothing buffered is sent: LOCAL_ASYNC results are lost, and
  its leases expire, as a SIGKILL leaves them. The worker's threads then wind down by themselves.
- pause (freeze, thaw): its calls and its steps wait at the same gate until the thaw, as a
  stopped process's threads do; a call or a step already under way runs on.
- term: the worker's own drain (`Worker.stop()`), as on SIGTERM.

A step already running when the fault lands runs to its end (a thread cannot be stopped), as a
stopped process's `hold` would sleep on; its result is not delivered when the worker was killed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import grpc

from wiggle.server import InProcessRpcError, InProcessStub
from wiggle.server._server import SERVICE_NAME

__all__ = ["EMBEDDED_WORKER", "EmbeddedWorker"]

#: The `--worker` value that runs the embedded worker instead of a command.
EMBEDDED_WORKER = "embedded"


class _Life:
    """One start of the worker: whether it is frozen or dead, which its calls and steps obey."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._frozen = False
        self.dead = False

    def gate(self, begin: Callable[[], None] | None = None) -> None:
        """Wait while frozen; then go on, or raise if the worker is dead. `begin` (a step's
        trace line) runs under the lock `kill` takes: a step either began before the kill
        returned, its line written, or never begins, as a process is killed between two writes,
        never in one (the runner counts the trace lines once the kill returned to judge whether
        it landed in time)."""
        with self._cond:
            while self._frozen and not self.dead:
                self._cond.wait()
            if self.dead:
                raise _Killed("the embedded worker was killed")
            if begin is not None:
                begin()

    def alive(self) -> bool:
        return not self.dead

    def freeze(self) -> None:
        with self._cond:
            self._frozen = True

    def thaw(self) -> None:
        with self._cond:
            self._frozen = False
            self._cond.notify_all()

    def kill(self) -> None:
        with self._cond:
            self.dead = True
            self._cond.notify_all()


class _Killed(Exception):
    """A step the killed worker would have begun."""


class _GatedStub:
    """The node's stub as one life of the worker sees it: every call passes the gate first."""

    def __init__(self, stub: Any, life: _Life) -> None:
        self._stub = stub
        self._life = life

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)
        method = getattr(self._stub, name)

        def call(request: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                self._life.gate()
            except _Killed:
                # The worker's retries back off as they do for a server that cannot be reached,
                # until its stop (kill, below) tells it to give up.
                raise InProcessRpcError(
                    grpc.StatusCode.UNAVAILABLE,
                    "the embedded worker was killed: its call went nowhere",
                ) from None
            return method(request, *args, **kwargs)

        return call


class EmbeddedWorker:
    """A Worker on `queues` over the node's `servicer`, `interceptors` on its calls; each
    `start()` a fresh one (a new life), as each start of a worker process is."""

    def __init__(
        self,
        servicer: Any,
        *,
        interceptors: Sequence[Any],
        queues: Sequence[str],
        trace_path: str,
        batch_size: int,
        label: str,
    ) -> None:
        self.argv = ["embedded", label]  # what a report names (WorkerProcess.argv)
        self._servicer = servicer
        self._interceptors = tuple(interceptors)
        self._queues = tuple(queues)
        self._trace_path = trace_path
        self._batch_size = batch_size
        self._worker: Any = None
        self._life: _Life | None = None

    def start(self) -> None:
        from wiggle.conformance._activities import build_registry
        from wiggle.embedded import in_process_worker

        life = _Life()
        stub = InProcessStub(
            self._servicer,
            service=SERVICE_NAME,
            interceptors=self._interceptors,
            alive=life.alive,
        )
        # The embedded node's own worker, as wiggle.embedded.Engine makes it, with the
        # conformance worker's settings (python -m wiggle.conformance).
        worker = in_process_worker(
            _GatedStub(stub, life),
            queues=self._queues,
            registry=build_registry(self._trace_path, gate=life.gate),
            concurrency=64,
            local_batch_size=self._batch_size,
            poll_wait_ms=2_000,
        )
        worker.start()
        self._worker, self._life = worker, life

    def kill(self) -> None:
        """An unclean death (above); returns at once, as a killed process is gone at once."""
        worker, life = self._worker, self._life
        self._worker = self._life = None
        if worker is None or life is None:
            return
        life.kill()
        # Its threads end by themselves: nothing they send arrives any more.
        threading.Thread(
            target=worker.stop, kwargs={"drain": False}, name="wiggle-killed", daemon=True
        ).start()

    def freeze(self) -> None:
        if self._life is not None:
            self._life.freeze()

    def thaw(self) -> None:
        if self._life is not None:
            self._life.thaw()

    def stop(self, grace_s: float = 10.0) -> None:
        """A drain (SIGTERM's), then a kill if it takes longer than `grace_s`."""
        worker = self._worker
        if worker is None:
            return
        if self._life is not None:
            self._life.thaw()
        draining = threading.Thread(target=worker.stop, name="wiggle-drain", daemon=True)
        draining.start()
        draining.join(grace_s)
        if draining.is_alive():
            self.kill()
        self._worker = self._life = None

    def exited(self) -> int | None:
        """Never ends on its own: it is a part of this process."""
        return None

    def death(self, status: int) -> str:
        return f"the embedded worker ended ({status})"
