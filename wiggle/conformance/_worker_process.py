"""The worker under test as a process the runner can start, kill, freeze and stop.

Always a process of its own, never a thread: the crash cases SIGKILL it, and an external worker
(`--worker CMD`) is one anyway. It runs in a process group of its own so that a command which
forks the real worker (`go run ...`, a shell script) is killed or frozen as a whole.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

__all__ = ["PYTHON_WORKER", "WorkerExited", "WorkerProcess"]

PYTHON_WORKER = f"{shlex.quote(sys.executable)} -m wiggle.conformance"


class WorkerExited(Exception):
    """The worker under test ended on its own: no case can run on it, and waiting for its polls
    or its steps would only spend every case's deadline."""


class WorkerProcess:
    def __init__(self, command: str, env: dict[str, str], log_path: Path) -> None:
        self.argv = shlex.split(command)
        self.env = env
        self.log_path = log_path
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def start(self) -> None:
        self._log = self.log_path.open("ab")
        self._proc = subprocess.Popen(
            self.argv,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def _signal(self, signum: signal.Signals) -> None:
        if self._proc is not None and self._proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):  # it died on its own meanwhile
                os.killpg(self._proc.pid, signum)

    def kill(self) -> None:
        """An unclean death: nothing buffered survives."""
        self._signal(signal.SIGKILL)
        self._reap(5.0)

    def freeze(self) -> None:
        """Freeze every thread (heartbeats included) until `thaw`."""
        self._signal(signal.SIGSTOP)

    def thaw(self) -> None:
        self._signal(signal.SIGCONT)

    def pause(self, ms: int) -> None:
        """Freeze for `ms`, then let it go on."""
        self.freeze()
        try:
            time.sleep(ms / 1000)
        finally:
            self.thaw()

    def stop(self, grace_s: float = 10.0) -> None:
        """A graceful stop (SIGTERM drains), then SIGKILL if it takes longer than `grace_s`."""
        self._signal(signal.SIGTERM)
        if not self._reap(grace_s):
            self.kill()

    def _reap(self, timeout: float) -> bool:
        proc = self._proc
        if proc is None:
            return True
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        self._proc = None
        if self._log is not None:
            self._log.close()
            self._log = None
        return True

    def exited(self) -> int | None:
        """The exit status when the process has ended on its own, else None."""
        return None if self._proc is None else self._proc.poll()

    def death(self, status: int) -> str:
        """What to tell the user of a worker that ended with `status`: the command and the end
        of what it printed (its log file holds the rest)."""
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()[-5:]
        except OSError:
            lines = []
        said = "".join(f"\n    {line}" for line in lines) or " (it printed nothing)"
        return (
            f"the worker `{shlex.join(self.argv)}` exited with status {status}; "
            f"the end of its output ({self.log_path}):{said}"
        )
