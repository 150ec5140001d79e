"""Server and worker subprocesses for benchmarks: real processes, loopback only, always reaped."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from wiggle.wire import open_channel

__all__ = ["free_port", "running", "wait_serving"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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
