"""A class-data-sharing archive for the Java conformance worker: the JVM maps the classes it
loaded once (gRPC, protobuf, the worker's own) from a file instead of loading and verifying
them from the jar at every start. The corpus starts the worker some twenty times per session
(every kill, drain, restart and TLS run), and each start is what a fault case waits on.

The archive is the JVM's own (`-XX:ArchiveClassesAtExit`, JDK 13 and later): a training run
of the worker over a few flows in every mode writes it when the worker exits, and
`-XX:SharedArchiveFile` maps it. It belongs to one jar: a JVM given the archive of another
build ignores it (and starts as it would without), and `java_class_archive` trains anew
whenever the jar is newer than its archive.
"""

from __future__ import annotations

import fcntl
import json
import shlex
import tempfile
import time
from pathlib import Path

from wiggle.conformance import RunnerOptions
from wiggle.conformance._databases import fresh_databases
from wiggle.conformance._session import MAIN_QUEUES, Session
from wiggle.conformance._worker_process import WorkerProcess

__all__ = ["java_class_archive"]

#: The training run's flows, one per mode: the calls a worker makes in each (CompleteTask,
#: AdvanceRun, a batch) load the classes every case needs.
_TRAINING_MODES = ("SERVER", "LOCAL_SYNC", "LOCAL_ASYNC")
_TRAINING_STEPS = [
    {"task": "append", "id": "a"},
    {"task": "hold", "id": "b"},
    {"task": "append", "id": "c"},
]
#: A bound for the training run on a loaded machine (it takes a few seconds).
_TRAINING_S = 120.0


def java_class_archive(jar: Path, java: list[str]) -> Path:
    """The archive of `jar` (next to it), trained with the command `java` (the JVM and its
    flags, before `-jar`) unless it is newer than the jar. One training at a time across test
    processes (xdist): the others wait for it and find it fresh."""
    archive = jar.with_suffix(".jsa")
    with open(jar.parent / f".{archive.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not archive.exists() or archive.stat().st_mtime < jar.stat().st_mtime:
            _train(jar, java, archive)
    return archive


def _train(jar: Path, java: list[str], archive: Path) -> None:
    """Run the worker over a flow in each mode, then stop it: it writes the archive as it exits
    (a drain ends in an ordinary exit). Written to a temporary name first, so that no JVM maps
    half an archive."""
    partial = archive.with_suffix(".jsa.part")
    partial.unlink(missing_ok=True)
    command = shlex.join([*java, f"-XX:ArchiveClassesAtExit={partial}", "-jar", str(jar)])
    options = RunnerOptions(modes=["SERVER"], databases=["sqlite"], worker=command)
    with tempfile.TemporaryDirectory(prefix="wiggle-jvm-") as tmp, fresh_databases("sqlite") as db:
        log = Path(tmp) / "training.log"
        session = Session(db(), "SERVER", "sqlite", options, Path(tmp))
        try:
            worker = WorkerProcess(command, {**session.env, "WIGGLE_QUEUES": MAIN_QUEUES}, log)
            worker.start()
            try:
                _run_training_flows(session)
            finally:
                worker.stop()
        finally:
            session.close()
        if not partial.exists():
            raise AssertionError(f"the JVM wrote no class archive; its log:\n{log.read_text()}")
    partial.replace(archive)


def _run_training_flows(session: Session) -> None:
    client = session.client
    started = []
    for mode in _TRAINING_MODES:
        name = f"jvm-training-{mode.lower()}"
        flow = {"wiggle": 1, "name": name, "execution": mode, "steps": _TRAINING_STEPS}
        version = client.deploy(json.dumps(flow).encode(), filename="training.json").version
        started.append(client.start(name, {"hold_ms": 50}, version=version))
    deadline = time.monotonic() + _TRAINING_S
    for instance in started:
        try:  # WaitInstance answers the moment the instance ends
            client.wait(instance.instance_id, timeout=max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            raise AssertionError(
                f"the JVM training run did not end within {_TRAINING_S} s"
            ) from None
