"""A corpus session: one (database, mode) with its engine, server, recorder and worker processes.

`Session` owns the in-process server (with the recorder as its interceptor), the trace file the
activities write, and the two worker processes (the main one, which the faults hit, and one on the
`side` queue); it starts them, waits for their first polls, injects faults and deploys the cases'
flows. `Watch` follows one run: its trace lines, its child instances, its moments.
"""

from __future__ import annotations

import functools
import json
import os
import secrets
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wiggle.conformance._cases import Case, Fault, Moment
from wiggle.conformance._embedded_worker import EMBEDDED_WORKER, EmbeddedWorker
from wiggle.conformance._recorder import Recorder
from wiggle.conformance._spoiled import Landed
from wiggle.conformance._trace import Trace, TraceLine
from wiggle.conformance._worker_process import WorkerExited, WorkerProcess

if TYPE_CHECKING:
    from collections.abc import Callable

    from wiggle.compiler import CompiledFlow
    from wiggle.conformance._check import RunResult
    from wiggle.engine import Engine
    from wiggle.graph import Graph

__all__ = [
    "BATCH_SIZE",
    "MAIN_QUEUES",
    "MAX_PAYLOAD_BYTES",
    "MAX_REQUEST_BYTES",
    "SIDE_QUEUES",
    "RunnerOptions",
    "Session",
    "Watch",
]

#: The worker's LOCAL_ASYNC batch size (WIGGLE_CONFORMANCE_BATCH_SIZE) and the server's limits
#: in every session: small, so that a few steps reach a full batch or the size limit.
BATCH_SIZE = 5
MAX_PAYLOAD_BYTES = 64 * 1024
MAX_REQUEST_BYTES = 256 * 1024
#: The queues of the session's two workers: the one the faults hit, and a second one.
MAIN_QUEUES = "default,other"
SIDE_QUEUES = "side"
#: How long a stopped worker's poll may stay parked in the server (its wait slice, and more).
_POLL_GONE_S = 5.0
#: How long a started worker may take to begin polling before the cases go ahead regardless.
_WORKER_READY_S = 60.0
_READY_SLICE_S = 0.25


@dataclass(frozen=True)
class RunnerOptions:
    modes: Sequence[str]
    databases: Sequence[str]
    worker: str  # the command that starts the worker under test
    parallel: int = 16  # cases run at once in phase 1
    verbose: bool = False  # on a failed run, add the instance's trace and event log
    on_result: Callable[[RunResult], None] | None = None
    #: Judge how the worker drove each run (reports per mode), not only its outcome.
    orchestration: bool = True
    #: Run the modes of a database at once (False: one after another).
    modes_at_once: bool = True
    #: The engines' database profile (PostgreSQL databases only; SQLite keeps the default).
    database_profile: str = "default"
    #: Called with each session's engine before any case runs (tests install fault injectors
    #: on its connections here).
    on_engine: Callable[[Engine], None] | None = None


class Session:
    """One (database, mode): engine, server, client, trace and the current worker process."""

    def __init__(self, url: str, mode: str, database: str, options: RunnerOptions, tmp: Path):
        from wiggle.graph import ExecutionMode
        from wiggle.server import embedded_stack

        self.mode = mode
        self.database = database
        self.options = options
        self.tmp = tmp
        self._stack = ExitStack()
        self.token = secrets.token_urlsafe(24)
        self.recorder = Recorder()
        profile = self.options.database_profile if database != "sqlite" else "default"
        embedded = self._stack.enter_context(
            embedded_stack(
                url,
                database_profile=profile,
                default_mode=ExecutionMode(mode),
                token=self.token,
                interceptors=[self.recorder],
                max_payload_bytes=MAX_PAYLOAD_BYTES,
                max_request_bytes=MAX_REQUEST_BYTES,
            )
        )
        self.engine, self.client, self.address = embedded.engine, embedded.client, embedded.address
        self.server = embedded.server
        if options.on_engine is not None:
            options.on_engine(self.engine)
        self.trace = Trace(tmp / f"trace-{mode}-{uuid.uuid4().hex[:8]}.jsonl")
        self.env = {
            **os.environ,
            "WIGGLE_ADDRESS": self.address,
            "WIGGLE_AUTH_TOKEN": self.token,
            "WIGGLE_CONFORMANCE_TRACE": str(self.trace.path),
            "WIGGLE_CONFORMANCE_BATCH_SIZE": str(BATCH_SIZE),
        }
        for key in ("WIGGLE_TLS_CA", "WIGGLE_QUEUES"):
            self.env.pop(key, None)
        self.worker: WorkerProcess | EmbeddedWorker | None = None
        self.side: WorkerProcess | EmbeddedWorker | None = None
        self.graphs: dict[str, Graph] = {}
        self._tls_address: str | None = None
        self._tls_ca: str = ""

    def close(self) -> None:
        self._stack.close()

    @property
    def embedded(self) -> bool:
        """Whether the worker under test is the embedded one (_embedded_worker), in process."""
        return self.options.worker == EMBEDDED_WORKER

    def _process(self, label: str, queues: str, **env: str) -> WorkerProcess | EmbeddedWorker:
        if self.embedded:
            return EmbeddedWorker(
                self.server.service,
                interceptors=[self.recorder],
                queues=queues.split(","),
                trace_path=str(self.trace.path),
                batch_size=BATCH_SIZE,
                label=label,
            )
        log = self.tmp / f"worker-{self.mode}-{label.replace('/', '_')}.log"
        return WorkerProcess(self.options.worker, {**self.env, "WIGGLE_QUEUES": queues, **env}, log)

    def _start(self, *workers: tuple[WorkerProcess | EmbeddedWorker, str]) -> None:
        """Start each (process, its queues) and wait until each polls: a case's clock must not
        run while a worker boots (a JVM takes seconds: its deadline would pay for the start-up,
        and a fault aimed at one of its steps would find a worker that had run nothing yet)."""
        seen = [
            (tuple(q.split(",")), self.recorder.polls_seen(tuple(q.split(",")))) for _, q in workers
        ]
        for process, _ in workers:
            process.start()
        deadline = time.monotonic() + _WORKER_READY_S
        for (process, _), (key, before) in zip(workers, seen, strict=True):
            # In slices: a worker that dies at start (a bad command, a missing build) is told
            # at once instead of after the wait and every case's deadline.
            while not self.recorder.wait_polling(key, before, _READY_SLICE_S):
                status = process.exited()
                if status is not None:
                    raise WorkerExited(process.death(status))
                if time.monotonic() > deadline:
                    break

    def worker_died(self) -> str | None:
        """Why the main or side worker is gone when it ended on its own, else None."""
        for process in (self.worker, self.side):
            status = None if process is None else process.exited()
            if process is not None and status is not None:
                return process.death(status)
        return None

    @contextmanager
    def worker_process(self, label: str) -> Iterator[WorkerProcess | EmbeddedWorker]:
        self.worker = self._process(label, MAIN_QUEUES)
        self.side = self._process(f"{label}-side", SIDE_QUEUES)
        try:
            # Inside the try: a worker that starts but never polls is stopped all the same.
            self._start((self.worker, MAIN_QUEUES), (self.side, SIDE_QUEUES))
            yield self.worker
        finally:
            self.worker.stop()
            self.side.stop()
            self.worker = self.side = None

    def restart(self) -> None:
        """A fresh main worker (after a case that changed what it believes of the server)."""
        if self.worker is not None:
            self.worker.stop()
            self.recorder.wait_polls_ended(tuple(MAIN_QUEUES.split(",")), _POLL_GONE_S)
            self._start((self.worker, MAIN_QUEUES))

    @contextmanager
    def tls_worker(self, label: str) -> Iterator[None]:
        """For one run: the usual workers stand aside and a worker connected over TLS (to a
        second server of the same engine, with the same token) serves every queue. The embedded
        worker has no transport to secure: one of it serves every queue, in process."""
        if self._tls_address is None and not self.embedded:
            from wiggle.conformance._tls import make_certificates
            from wiggle.server import Server, ServerConfig

            certs = make_certificates(self.tmp / f"tls-{self.mode}-{uuid.uuid4().hex[:8]}")
            # A literal address, not "localhost": gRPC's resolver gives ::1 and 127.0.0.1 for
            # that name, a JVM's only 127.0.0.1 (/etc/hosts). A server that got ::1:P but found
            # 127.0.0.1:P taken by another process listened where the worker never looked, and
            # the worker talked to that other process (a corpus run on a busy machine).
            server = Server(
                self.engine,
                ServerConfig(
                    address="127.0.0.1:0",
                    token=self.token,
                    grace_s=1.0,
                    tls_cert=certs.cert,
                    tls_key=certs.key,
                    max_payload_bytes=MAX_PAYLOAD_BYTES,
                    max_request_bytes=MAX_REQUEST_BYTES,
                ),
                interceptors=[self.recorder],
            )
            self._tls_address = f"127.0.0.1:{server.start()}"
            self._stack.callback(server.stop)
            self._tls_ca = str(certs.ca)
        assert self.worker is not None and self.side is not None
        self.worker.stop()
        self.side.stop()
        self.recorder.wait_polls_ended(None, _POLL_GONE_S)
        tls = self._process(
            label,
            f"{MAIN_QUEUES},{SIDE_QUEUES}",
            WIGGLE_ADDRESS=self._tls_address or "",
            WIGGLE_TLS_CA=self._tls_ca,
        )
        try:
            self._start((tls, f"{MAIN_QUEUES},{SIDE_QUEUES}"))
            yield
        finally:
            tls.stop()
            self.recorder.wait_polls_ended(None, _POLL_GONE_S)
            self._start((self.worker, MAIN_QUEUES), (self.side, SIDE_QUEUES))

    def inject(self, fault: Fault) -> Landed | None:
        """Do the fault; when it landed (the worker stopped) and how far the trace was then."""
        worker = self.worker
        if worker is None:
            return None
        began = time.monotonic()
        if fault.action == "kill":
            worker.kill()  # returns once the process is gone: it wrote and sent nothing later
            landed = self.landed(fault.action, fault.when, began=began)
            worker.start()  # a fresh process takes over once the lease has expired
        elif fault.action == "term":
            worker.stop()  # drains: what it computed is reported before it exits
            landed = self.landed(fault.action, fault.when, began=began)
            worker.start()
        else:
            worker.freeze()
            landed = self.landed(fault.action, fault.when, began=began)
            try:
                time.sleep(fault.ms / 1000)
            finally:
                worker.thaw()
            landed = replace(landed, thawed=time.monotonic())
        return landed

    def landed(self, action: str, when: Moment, *, began: float | None = None) -> Landed:
        return Landed(action, when, time.monotonic(), self.trace.refresh(), began=began)

    def deploy(self, case: Case) -> str:
        """Register the case's flows (children first, in order); the version under test."""
        version = ""
        for flow in [*case.flows, case.flow]:
            source = json.dumps(flow).encode()
            version = self.client.deploy(source, filename=str(case.path)).version
            compiled = _compiled(source, str(case.path))
            self.graphs[compiled.version] = compiled.graph
        return version


@functools.lru_cache(maxsize=1024)
def _compiled(source: bytes, path: str) -> CompiledFlow:
    """A case's flow compiled once per process: every (database, mode) session deploys the
    same flows, and compiling them was a tenth of a corpus run's CPU in the runner."""
    from wiggle.compiler import load_flow

    return load_flow(source, path)


class Watch:
    """What one run has done so far: its trace lines and the tokens of its instances."""

    def __init__(self, session: Session, case: Case, root: str, mark: int) -> None:
        self.session = session
        self.root = root
        self.mark = mark
        self.root_flow = str(case.flow["name"])
        # Child flow names belong to this case alone and its runs go one at a time, so a trace
        # line of such a flow written after `mark` is one of this run's children.
        self.child_flows = {str(f["name"]) for f in case.flows} - {self.root_flow}
        self._tokens: dict[str, list[tuple[str, str]]] | None = None

    def lines(self) -> list[TraceLine]:
        return self.session.trace.since(self.mark)

    def key(self, line: TraceLine) -> str | None:
        if line.instance_id == self.root:
            return line.node_id
        if line.flow in self.child_flows:
            return f"{line.flow}/{line.node_id}"
        return None

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for line in self.lines():
            key = self.key(line)
            if key is not None:
                counts[key] = counts.get(key, 0) + 1
        return counts

    def descendants(self, flow: str | None = None) -> list[Any]:
        """Child instances (any depth) of the root, optionally only those of `flow`."""
        client = self.session.client
        found: dict[str, Any] = {}
        known = {self.root}
        changed = True
        while changed:  # a grandchild's parent may be listed after it: repeat to a fixpoint
            changed = False
            for name in sorted(self.child_flows):
                for inst in client.list_instances(flow=name, limit=1000):
                    if inst.parent_instance_id in known and inst.instance_id not in found:
                        found[inst.instance_id] = inst
                        known.add(inst.instance_id)
                        changed = True
        return [i for i in found.values() if flow is None or i.flow == flow]

    def forget_tokens(self) -> None:
        self._tokens = None

    def reached(self, moment: Moment) -> bool:
        if moment.kind == "at_start":
            return True
        if moment.kind == "started":
            return any(self.key(line) == moment.key for line in self.lines())
        if self._tokens is None:
            self._tokens = {}
        flow = moment.flow or ""
        if flow not in self._tokens:
            ids = [self.root] if not flow else [i.instance_id for i in self.descendants(flow)]
            self._tokens[flow] = [
                (t.node_id, str(t.state))
                for i in ids
                for t in self.session.client.describe(i).tokens
            ]
        return (moment.node, moment.kind) in self._tokens[flow]
