"""The distributed commands as subprocesses: `wiggle server` and `wiggle worker` running, driven
by `wiggle deploy / start / signal / cancel / status`, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

TOKEN = "acceptance-token"

HANDLERS = """\
from wiggle import activity

@activity
def hello(ctx):
    return {**ctx, "hello": True}

@activity
def bye(ctx):
    return {**ctx, "bye": True}
"""

GREET = "wiggle: 1\nname: greet\nsteps:\n  - task: hello\n  - task: bye\n"
GATE = "wiggle: 1\nname: gate\nsteps:\n  - await: go\n  - task: hello\n"


def _env(**extra: str) -> dict[str, str]:
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


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "handlers.py").write_text(HANDLERS)
    (tmp_path / "greet.yaml").write_text(GREET)
    (tmp_path / "gate.yaml").write_text(GATE)
    return tmp_path


@pytest.fixture
def server(work: Path, database_url: str) -> Iterator[tuple[str, Running]]:
    running = Running(
        ["server", "--address", "127.0.0.1:0", "--database", database_url, "--grace", "2"],
        work,
        _env(WIGGLE_AUTH_TOKEN=TOKEN),
    )
    try:
        port = running.wait_for(r"listening on 127\.0\.0\.1:(\d+)").group(1)
        yield f"127.0.0.1:{port}", running
    finally:
        running.stop()


def wiggle(address: str, *args: str, cwd: Path, token: str | None = TOKEN, timeout: float = 120):
    env = _env(WIGGLE_ADDRESS=address, **({"WIGGLE_AUTH_TOKEN": token} if token else {}))
    return subprocess.run(
        [sys.executable, "-m", "wiggle", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_deploy_start_signal_cancel_status(server, work):
    address, _ = server
    deployed = wiggle(address, "deploy", "greet.yaml", "gate.yaml", "--json", cwd=work)
    assert deployed.returncode == 0, deployed.stderr
    assert [(d["name"], d["created"]) for d in json.loads(deployed.stdout)] == [
        ("greet", True),
        ("gate", True),
    ]
    again = wiggle(address, "deploy", "greet.yaml", cwd=work)
    assert again.returncode == 0 and "unchanged" in again.stdout

    started = wiggle(address, "start", "gate", "--input", '{"n": 1}', "--id", "g1", cwd=work)
    assert started.returncode == 0, started.stderr
    assert started.stdout.strip() == "g1"

    status = wiggle(address, "status", "g1", "--json", cwd=work)
    assert status.returncode == 0, status.stderr
    view = json.loads(status.stdout)
    assert view["status"] == "RUNNING" and view["context"] == {"n": 1}
    assert [(t["node_id"], t["state"]) for t in view["tokens"]] == [("go", "AWAITING")]

    sent = wiggle(address, "signal", "g1", "go", "--payload", '{"ok": true}', cwd=work)
    assert sent.returncode == 0 and sent.stdout.strip() == "delivered"

    wiggle(address, "start", "gate", "--id", "g2", cwd=work)
    cancelled = wiggle(address, "cancel", "g2", "--reason", "changed my mind", cwd=work)
    assert cancelled.returncode == 0 and cancelled.stdout.strip() == "CANCELLED"
    human = wiggle(address, "status", "g2", "--events", cwd=work)
    assert human.returncode == 0
    assert "CANCELLED" in human.stdout and "changed my mind" in human.stdout


def test_worker_runs_what_start_waits_for(server, work):
    address, _ = server
    assert wiggle(address, "deploy", "greet.yaml", cwd=work).returncode == 0
    worker = Running(
        ["worker", "--handlers", "handlers.py", "--concurrency", "4"],
        work,
        _env(WIGGLE_ADDRESS=address, WIGGLE_AUTH_TOKEN=TOKEN),
    )
    try:
        done = wiggle(
            address, "start", "greet", "--input", '{"n": 2}', "--wait", "--json", cwd=work
        )
        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout)
        assert summary["status"] == "COMPLETED"
        assert summary["context"] == {"n": 2, "hello": True, "bye": True}
        status = wiggle(address, "status", summary["instance_id"], "--events", cwd=work)
        assert re.search(r"step_completed\s+hello\s+attempt 1", status.stdout), status.stdout
    finally:
        assert worker.stop() == 0


def test_status_watch_follows_until_finished(server, work):
    address, _ = server
    wiggle(address, "deploy", "gate.yaml", cwd=work)
    wiggle(address, "start", "gate", "--id", "w1", cwd=work)
    watcher = subprocess.Popen(
        [sys.executable, "-m", "wiggle", "status", "w1", "--watch", "--interval", "0.2"],
        cwd=work,
        env=_env(WIGGLE_ADDRESS=address, WIGGLE_AUTH_TOKEN=TOKEN),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.0)
    assert watcher.poll() is None  # still watching a RUNNING instance
    wiggle(address, "signal", "w1", "go", cwd=work)
    wiggle(address, "cancel", "w1", cwd=work)
    out, err = watcher.communicate(timeout=60)
    assert watcher.returncode == 0, err
    assert "signal" in out and "CANCELLED" in out


def test_errors_exit_1_with_a_message(server, work):
    address, _ = server
    unknown = wiggle(address, "status", "nope", cwd=work)
    assert unknown.returncode == 1 and "no instance with id 'nope'" in unknown.stderr
    no_flow = wiggle(address, "start", "nope", cwd=work)
    assert no_flow.returncode == 1 and "not registered" in no_flow.stderr
    no_token = wiggle(address, "status", "nope", cwd=work, token=None)
    assert no_token.returncode == 1 and "bearer token" in no_token.stderr
    bad_json = wiggle(address, "start", "greet", "--input", "{", cwd=work)
    assert bad_json.returncode == 1 and "not valid JSON" in bad_json.stderr
    for result in (unknown, no_flow, no_token, bad_json):
        assert "Traceback" not in result.stderr


def test_server_stops_gracefully_on_sigterm(server):
    _, running = server
    began = time.monotonic()
    assert running.stop() == 0
    assert time.monotonic() - began < 15
    running.wait_for("stopped")


def test_server_refuses_a_public_address_without_a_token(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "wiggle",
            "server",
            "--address",
            "0.0.0.0:0",
            "--database",
            f"sqlite:///{tmp_path / 'w.db'}",
        ],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "token" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "w.db").exists()  # refused before touching the database


def test_two_servers_share_one_database(server, work, database_url):
    first, _ = server
    second = Running(
        ["server", "--address", "127.0.0.1:0", "--database", database_url, "--grace", "2"],
        work,
        _env(WIGGLE_AUTH_TOKEN=TOKEN),
    )
    try:
        port = second.wait_for(r"listening on 127\.0\.0\.1:(\d+)").group(1)
        other = f"127.0.0.1:{port}"
        assert wiggle(first, "deploy", "greet.yaml", cwd=work).returncode == 0
        worker = Running(
            ["worker", "--handlers", "handlers.py"],
            work,
            _env(WIGGLE_ADDRESS=other, WIGGLE_AUTH_TOKEN=TOKEN),
        )
        try:
            # Started through the first server, run by a worker polling the second.
            done = wiggle(first, "start", "greet", "--input", "{}", "--wait", "--json", cwd=work)
            assert done.returncode == 0, done.stderr
            assert json.loads(done.stdout)["status"] == "COMPLETED"
        finally:
            assert worker.stop() == 0
    finally:
        assert second.stop() == 0
