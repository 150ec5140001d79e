"""Server and worker subprocesses for benchmarks: real processes, loopback only, always reaped.

`running` starts `python -m wiggle ...` processes; `running_shell` starts another program's
workers (`wiggle bench throughput --worker-command`): one shell command per process, each in a
process group of its own, so that the program the shell starts, whether the shell execs it or
waits for it, gets the SIGTERM and is waited for, and `tree_cpu_seconds` counts its CPU.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence

import grpc
import psutil
from grpc_health.v1 import health_pb2, health_pb2_grpc

from wiggle._ports import free_port
from wiggle.wire import open_channel

__all__ = ["free_port", "running", "running_shell", "tree_cpu_seconds", "wait_serving"]


def _stderr_fd() -> int | None:
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # a captured stderr (tests) has no descriptor
        return None


def wait_serving(address: str, timeout_s: float = 30.0) -> None:
    """Block until the server at `address` answers its gRPC health check with SERVING."""
    deadline = time.monotonic() + timeout_s
    with open_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while True:
            try:
                reply = stub.Check(health_pb2.HealthCheckRequest(), timeout=1.0)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"no server answered at {address} within {timeout_s:.0f}s")
            time.sleep(0.1)


@contextlib.contextmanager
def running(
    commands: Sequence[Sequence[str]], env: dict[str, str] | None = None
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Run each command as a `python -m wiggle ...` subprocess; SIGTERM them all on exit.

    Yields the processes (a benchmark reads their CPU time). Their stdout goes to this
    process's stderr: a benchmark's stdout carries its figures (or its JSON) alone.
    """
    full_env = {**os.environ, **(env or {})}
    out = _stderr_fd()
    procs = [
        subprocess.Popen([sys.executable, "-m", "wiggle", *cmd], env=full_env, stdout=out)
        for cmd in commands
    ]
    try:
        yield procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextlib.contextmanager
def running_shell(
    command: str, envs: Sequence[dict[str, str]], *, grace_s: float = 30.0
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Run `command` through /bin/sh once per environment in `envs` (each added to this
    process's), each as the leader of a new process group; on exit SIGTERM every group and wait
    until each is empty (`grace_s`, then SIGKILL).

    Yields the shells (`tree_cpu_seconds` reads them with their descendants). Their stdout goes
    to this process's stderr, as `running`'s does.
    """
    out = _stderr_fd()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for env in envs:
            procs.append(
                subprocess.Popen(
                    ["/bin/sh", "-c", command],
                    env={**os.environ, **env},
                    stdout=out,
                    start_new_session=True,
                )
            )
        yield procs
    finally:
        for proc in procs:
            _signal_group(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for proc in procs:
            while _group_alive(proc) and time.monotonic() < deadline:
                time.sleep(0.05)
            if _group_alive(proc):
                _signal_group(proc.pid, signal.SIGKILL)
                proc.wait()


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _group_alive(proc: subprocess.Popen[bytes]) -> bool:
    """True while the group `proc` leads has a member that is not a zombie (`proc` itself is
    reaped here; an orphan's zombie waits for whatever reaps orphans, which may take seconds)."""
    if proc.poll() is None:
        return True
    for member in psutil.process_iter():
        try:
            if os.getpgid(member.pid) == proc.pid and member.status() != psutil.STATUS_ZOMBIE:
                return True
        except (psutil.Error, OSError):
            continue
    return False


def tree_cpu_seconds(procs: Sequence[subprocess.Popen[bytes]]) -> float:
    """User + system CPU seconds of `procs` and all their descendants so far: of each live one,
    and of the exited ones its parent has waited for (the parent's children_* times), so a
    program a shell starts counts as the shell's own work would."""
    total = 0.0
    for proc in procs:
        try:
            root = psutil.Process(proc.pid)
            tree = [root, *root.children(recursive=True)]
        except psutil.Error:
            continue
        for member in tree:
            try:
                t = member.cpu_times()
            except psutil.Error:
                continue  # exited meanwhile: counted in its parent's children_* next time
            total += t.user + t.system + t.children_user + t.children_system
    return total
