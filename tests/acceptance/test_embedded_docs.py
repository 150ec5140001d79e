"""docs/embedded.md's app runs as shown: its code, taken from the page, started as a process;
a POST answered with the very JSON the page prints; Ctrl-C closes the engine and exits 0. Then
the same app on PostgreSQL, with a second process on the database finding the orders done."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from wiggle._ports import free_port
from wiggle.engine import Engine as Core

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "embedded.md"
_BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)


def _blocks(language: str) -> list[str]:
    return [body for lang, body in _BLOCK.findall(PAGE.read_text()) if lang == language]


def _app() -> str:
    (app,) = [b for b in _blocks("python") if b.startswith("# app.py")]
    return app


def _shown_answer() -> Any:
    """The answer the page prints under its curl line (a `# {...}` comment)."""
    (shell,) = [b for b in _blocks("sh") if "curl" in b]
    (line,) = [ln for ln in shell.splitlines() if ln.startswith("# {")]
    return json.loads(line[2:])


def _post(port: int, body: Any) -> Any:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/", data=json.dumps(body).encode(), method="POST"
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


def _serve(tmp_path: Path, database: str) -> tuple[subprocess.Popen[bytes], int]:
    (tmp_path / "app.py").write_text(_app())
    port = free_port()
    env = {"PORT": str(port), "ORDERS_DB": database, "PATH": "/usr/bin:/bin"}
    process = subprocess.Popen([sys.executable, "app.py"], cwd=tmp_path, env=env)
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process, port
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise AssertionError(f"the app did not listen (exit {process.poll()})") from None
            time.sleep(0.1)


def _stop(process: subprocess.Popen[bytes]) -> int:
    process.send_signal(signal.SIGINT)
    return process.wait(timeout=30)


def test_the_app_answers_as_the_page_shows(tmp_path: Path) -> None:
    process, port = _serve(tmp_path, f"sqlite:///{tmp_path / 'orders.db'}")
    try:
        assert _post(port, {"qty": 3}) == _shown_answer()
    finally:
        code = _stop(process)
    assert code == 0


def test_the_app_on_postgresql_leaves_its_orders_for_any_node(
    tmp_path: Path, postgres_database_url: str
) -> None:
    process, port = _serve(tmp_path, postgres_database_url)
    try:
        answers = [_post(port, {"qty": n}) for n in (1, 2)]
    finally:
        code = _stop(process)
    assert code == 0
    assert [a["order"]["total_cents"] for a in answers] == [1250, 2500]
    other = Core(postgres_database_url)
    try:
        orders = other.list_instances(flow="order")
    finally:
        other.close()
    assert sorted(str(i.status) for i in orders) == ["COMPLETED", "COMPLETED"]
