"""The distributed commands as subprocesses: `wiggle server` and `wiggle worker` running, driven
by `wiggle deploy / start / signal / cancel / status`, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from clikit import TOKEN, Running, cli_env, wiggle

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


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "handlers.py").write_text(HANDLERS)
    (tmp_path / "greet.yaml").write_text(GREET)
    (tmp_path / "gate.yaml").write_text(GATE)
    return tmp_path


@pytest.mark.postgres_too
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


def test_start_count_starts_numbered_instances_once(server, work):
    address, _ = server
    assert wiggle(address, "deploy", "gate.yaml", cwd=work).returncode == 0
    many = wiggle(address, "start", "gate", "--count", "3", "--id", "c-{n}", cwd=work)
    assert many.returncode == 0, many.stderr
    assert many.stdout.split() == ["c-1", "c-2", "c-3"]
    listed = wiggle(address, "list", "--id-contains", "c-", "--json", cwd=work)
    assert listed.returncode == 0, listed.stderr
    assert sorted(i["instance_id"] for i in json.loads(listed.stdout)["instances"]) == [
        "c-1",
        "c-2",
        "c-3",
    ]
    # The same command again starts nothing new: each numbered id is already that instance.
    again = wiggle(address, "start", "gate", "--count", "4", "--id", "c-{n}", "--json", cwd=work)
    assert again.returncode == 0, again.stderr
    assert [s["instance_id"] for s in json.loads(again.stdout)["started"]] == [
        "c-1",
        "c-2",
        "c-3",
        "c-4",
    ]
    listed = wiggle(address, "list", "--id-contains", "c-", "--json", cwd=work)
    assert len(json.loads(listed.stdout)["instances"]) == 4
    unnumbered = wiggle(address, "start", "gate", "--count", "2", "--id", "same", cwd=work)
    assert unnumbered.returncode == 1 and "put {n} in the id" in unnumbered.stderr
    waiting = wiggle(address, "start", "gate", "--count", "2", "--wait", cwd=work)
    assert waiting.returncode == 1 and "--wait waits for one instance" in waiting.stderr
    for result in (unnumbered, waiting):
        assert "Traceback" not in result.stderr
    listed = wiggle(address, "list", "--flow", "gate", "--json", cwd=work)
    assert len(json.loads(listed.stdout)["instances"]) == 4, "a refused --count started nothing"


def test_worker_runs_what_start_waits_for(server, work):
    address, _ = server
    assert wiggle(address, "deploy", "greet.yaml", cwd=work).returncode == 0
    worker = Running(
        ["worker", "--handlers", "handlers.py", "--concurrency", "4"],
        work,
        cli_env(WIGGLE_ADDRESS=address, WIGGLE_AUTH_TOKEN=TOKEN),
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
        env=cli_env(WIGGLE_ADDRESS=address, WIGGLE_AUTH_TOKEN=TOKEN),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert watcher.stdout is not None
    # Its first lines: it is watching, and it has read the instance (its start event).
    first = watcher.stdout.readline() + watcher.stdout.readline()
    assert first.startswith("watching w1") and "instance started" in first, first
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
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "token" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "w.db").exists()  # refused before touching the database


def test_a_busy_port_is_refused_in_one_clear_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        result = subprocess.run(
            [sys.executable, "-m", "wiggle", "server", "--address", address,
             "--database", f"sqlite:///{tmp_path / 'w.db'}"],
            env=cli_env(), capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"wiggle: cannot listen on {address}: the address is in use (another server?)"
    ]


@pytest.mark.postgres_too
def test_two_servers_share_one_database(server, work, database_url):
    first, _ = server
    second = Running(
        ["server", "--address", "127.0.0.1:0", "--database", database_url, "--grace", "2"],
        work,
        cli_env(WIGGLE_AUTH_TOKEN=TOKEN),
    )
    try:
        port = second.wait_for(r"listening on 127\.0\.0\.1:(\d+)").group(1)
        other = f"127.0.0.1:{port}"
        assert wiggle(first, "deploy", "greet.yaml", cwd=work).returncode == 0
        worker = Running(
            ["worker", "--handlers", "handlers.py"],
            work,
            cli_env(WIGGLE_ADDRESS=other, WIGGLE_AUTH_TOKEN=TOKEN),
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


def test_scoped_credentials_from_files(work, database_url):
    """Credentials as files on both sides: nothing secret on any command line, and a worker
    credential of one queue refused on another."""
    import hashlib

    def digest(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()

    (work / "admin.token").write_text("admin-secret\n")
    (work / "client.token").write_text("client-secret\n")
    (work / "worker.token").write_text("worker-secret\n")
    (work / "credentials.toml").write_text(
        f'[[credential]]\nname = "ops"\nscopes = ["admin"]\ntoken_file = "admin.token"\n\n'
        f'[[credential]]\nname = "shop"\nscopes = ["client"]\n'
        f'token_sha256 = "{digest("client-secret")}"\n\n'
        f'[[credential]]\nname = "greeters"\nscopes = ["worker:default"]\n'
        f'token_sha256 = "{digest("worker-secret")}"\n'
    )
    server = Running(
        ["server", "--address", "127.0.0.1:0", "--database", database_url, "--grace", "2"],
        work,
        cli_env(WIGGLE_CREDENTIALS="credentials.toml"),
    )
    try:
        port = server.wait_for(r"listening on 127\.0\.0\.1:(\d+)").group(1)
        address = f"127.0.0.1:{port}"

        def run(*args: str, token_file: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "wiggle", *args, "--token-file", token_file],
                cwd=work,
                env=cli_env(WIGGLE_ADDRESS=address),
                capture_output=True,
                text=True,
                timeout=120,
            )

        assert run("deploy", "greet.yaml", token_file="admin.token").returncode == 0
        refused = run("deploy", "gate.yaml", token_file="client.token")
        assert refused.returncode == 1 and "'shop' (client) may not" in refused.stderr
        assert "Traceback" not in refused.stderr
        wrong_queue = Running(
            ["worker", "--handlers", "handlers.py", "--queue", "billing"],
            work,
            cli_env(WIGGLE_ADDRESS=address, WIGGLE_AUTH_TOKEN_FILE="worker.token"),
        )
        try:
            wrong_queue.wait_for(r"PERMISSION_DENIED.*may not poll queue 'billing'")
        finally:
            assert wrong_queue.stop() == 0
        worker = Running(
            ["worker", "--handlers", "handlers.py", "--token-file", "worker.token"],
            work,
            cli_env(WIGGLE_ADDRESS=address),
        )
        try:
            done = run(
                "start", "greet", "--input", "{}", "--wait", "--json", token_file="client.token"
            )
            assert done.returncode == 0, done.stderr
            assert json.loads(done.stdout)["status"] == "COMPLETED"
            for proc in (server.proc, worker.proc):
                cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
                assert b"secret" not in cmdline
        finally:
            assert worker.stop() == 0
    finally:
        assert server.stop() == 0
