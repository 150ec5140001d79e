"""`wiggle run --console` and `wiggle console` as subprocesses."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]

HANDLERS = (
    "from wiggle import activity\n\n@activity\ndef hello(ctx):\n    return {**ctx, 'hi': 1}\n"
)
FLOW = "wiggle: 1\nname: greet\nsteps:\n  - task: hello\n"


def _wiggle(*args: str, cwd: Path) -> subprocess.Popen[str]:
    # PYTHONFAULTHANDLER: a run that hangs can be made to print every thread's stack (SIGABRT).
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "wiggle.cli", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _signal_dispositions(pid: int) -> str:
    """The ignored and blocked signal masks of `pid` (Linux), for a failure message."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return "no /proc status"
    return ", ".join(line for line in status.splitlines() if line.startswith(("SigIgn", "SigBlk")))


def _line_with(proc: subprocess.Popen[str], text: str) -> str:
    assert proc.stdout is not None
    for line in proc.stdout:
        if text in line:
            return line
    raise AssertionError(
        f"no line with {text!r}; stderr: {proc.stderr.read() if proc.stderr else ''}"
    )


def test_run_with_console_serves_the_instance_page_and_stays_open_until_interrupted(tmp_path):
    (tmp_path / "handlers.py").write_text(HANDLERS)
    (tmp_path / "greet.yaml").write_text(FLOW)
    proc = _wiggle(
        "run",
        "greet.yaml",
        "--handlers",
        "handlers.py",
        "--input",
        "{}",
        "--console",
        "127.0.0.1:0",
        cwd=tmp_path,
    )
    try:
        url = _line_with(proc, "console: http://").split("console: ", 1)[1].strip()
        assert "/instances/" in url
        _line_with(proc, "COMPLETED")
        _line_with(proc, "still open")
        with urllib.request.urlopen(url, timeout=10) as response:
            page = response.read().decode()
        assert response.status == 200 and "COMPLETED" in page and "svg" in page
        # The signal dispositions the process runs with, said if it does not stop: a SIGINT
        # ignored or blocked from the start is inherited from whoever started it.
        dispositions = _signal_dispositions(proc.pid)
        proc.send_signal(signal.SIGINT)
        try:
            assert proc.wait(timeout=30) == 0
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)  # the fault handler prints where each thread is
            _out, err = proc.communicate(timeout=30)
            pytest.fail(f"still running 30 s after SIGINT; {dispositions}; stderr:\n{err[-12000:]}")
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()  # closes the pipes


def test_console_off_loopback_without_a_token_refuses_to_start(tmp_path):
    proc = _wiggle("console", "--listen", "0.0.0.0:0", cwd=tmp_path)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1
    assert "--token" in err and "Traceback" not in err


def test_console_require_login_or_trusted_proxy_without_a_token_says_what_is_missing(tmp_path):
    """`--require-login` on loopback used to say the console would be reachable from other
    machines."""
    proc = _wiggle("console", "--listen", "127.0.0.1:0", "--require-login", cwd=tmp_path)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1 and "--require-login" in err and "--token" in err
    assert "reachable from other machines" not in err and "Traceback" not in err
    env_proxy = {**os.environ, "WIGGLE_CONSOLE_TRUSTED_PROXY": "127.0.0.1"}
    proxied = subprocess.run(
        [sys.executable, "-m", "wiggle.cli", "console", "--listen", "127.0.0.1:0"],
        cwd=tmp_path,
        env=env_proxy,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proxied.returncode == 1 and "trusted-proxy" in proxied.stderr
    assert "--token" in proxied.stderr
