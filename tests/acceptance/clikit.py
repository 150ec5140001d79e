"""The acceptance suite's kit: `wiggle` as a subprocess, and long-running ones (a server, a
worker) whose stderr is collected so a test can wait for a line."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

TOKEN = "acceptance-token"


def cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WIGGLE_")}
    env["PYTHONIOENCODING"] = "utf-8"
    env.update(extra)
    return env


class Running:
    """A long-running `wiggle` subprocess whose stderr is collected in the background."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "wiggle", *args],
            cwd=cwd,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self._got_line = threading.Condition()
        self._drainer = threading.Thread(target=self._drain, daemon=True)
        self._drainer.start()

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._got_line:
                self.lines.append(line)
                self._got_line.notify_all()

    def wait_for(self, pattern: str, timeout: float = 60) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        with self._got_line:
            while True:
                for line in self.lines:
                    found = re.search(pattern, line)
                    if found:
                        return found
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    raise AssertionError(f"no {pattern!r} in:\n{''.join(self.lines)}")
                self._got_line.wait(min(left, 0.5))

    def stop(self, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self._drainer.join(10)
            assert self.proc.stderr is not None
            self.proc.stderr.close()


def wiggle(address: str, *args: str, cwd: Path, token: str | None = TOKEN, timeout: float = 120):
    env = cli_env(WIGGLE_ADDRESS=address, **({"WIGGLE_AUTH_TOKEN": token} if token else {}))
    return subprocess.run(
        [sys.executable, "-m", "wiggle", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
