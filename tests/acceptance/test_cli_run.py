"""`wiggle run` as a subprocess: engine, server and worker in one process, on small flows and
handlers written here, and on the shipped order-fulfilment example."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

HANDLERS = """\
from wiggle import NonRetryable, activity, step

@activity
def hello(ctx):
    return {**ctx, "hello": step().attempt}

@activity
def bye(ctx):
    return {**ctx, "bye": True}

@activity
def take(payload):
    return {**payload["context"], "got": payload["signal"]}

@activity
def keep(ctx):
    return True

@activity
def double(x):
    return x * 2

@activity
def gather(payload):
    return {"ys": payload["results"]}

@activity
def explode(ctx):
    raise NonRetryable("boom: " + ctx.get("why", "no reason"))
"""

FLOWS = {
    "greet.yaml": "wiggle: 1\nname: greet\nsteps:\n  - task: hello\n  - task: bye\n",
    "gate.yaml": (
        "wiggle: 1\nname: gate\nsteps:\n  - task: hello\n"
        "  - await: go\n    apply: take\n  - task: bye\n"
    ),
    "child.yaml": "wiggle: 1\nname: child\nsteps:\n  - task: bye\n",
    "parent.yaml": "wiggle: 1\nname: parent\nsteps:\n  - task: hello\n  - subflow: child\n",
    "fails.yaml": "wiggle: 1\nname: fails\nsteps:\n  - task: hello\n  - task: explode\n",
    "items.yaml": (
        "wiggle: 1\nname: items\nsteps:\n  - filter: keep\n  - for_each: /xs\n"
        "    steps: [{task: double}]\n    combine: gather\n"
    ),
}


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "handlers.py").write_text(HANDLERS)
    for name, text in FLOWS.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def wiggle(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WIGGLE_")}
    env["PYTHONIOENCODING"] = "utf-8"
    return subprocess.run(
        [sys.executable, "-m", "wiggle", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def last_json(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


def test_run_prints_progress_and_completes(work):
    result = wiggle(
        "run", "greet.yaml", "--handlers", "handlers.py", "--input", '{"n": 1}', cwd=work
    )
    assert result.returncode == 0, result.stderr
    assert "✓ hello (attempt 1)" in result.stdout
    assert "✓ bye (attempt 1)" in result.stdout
    assert "COMPLETED" in result.stdout
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("mode", ["SERVER", "LOCAL_SYNC", "LOCAL_ASYNC"])
def test_run_json_last_line(work, mode):
    result = wiggle(
        "run",
        "greet.yaml",
        "--handlers",
        "handlers.py",
        "--input",
        '{"n": 1}',
        "--mode",
        mode,
        "--json",
        cwd=work,
    )
    assert result.returncode == 0, result.stderr
    assert last_json(result.stdout) == {
        "status": "COMPLETED",
        "context": {"n": 1, "hello": 1, "bye": True},
    }
    assert f"({mode})" in result.stderr  # progress goes to stderr with --json


def test_progress_names_for_each_items_and_predicate_outcomes(work):
    result = wiggle(
        "run", "items.yaml", "--handlers", "handlers.py", "--input", '{"xs": [1, 2]}', cwd=work
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "  ✓ keep → true (attempt 1)" in lines
    assert "  ✓ double (item 0, attempt 1)" in lines
    assert "  ✓ double (item 1, attempt 1)" in lines
    assert '"ys": [' in result.stdout


def test_worker_logs_go_to_stderr_never_inside_progress_lines(work):
    result = wiggle("run", "fails.yaml", "--handlers", "handlers.py", "--input", "{}", cwd=work)
    assert result.returncode == 1
    assert "Traceback" not in result.stdout  # the activity's traceback is a log record
    assert "  ✗ explode (attempt 1): boom: no reason" in result.stdout.splitlines()


def test_run_delivers_signals(work):
    result = wiggle(
        "run",
        "gate.yaml",
        "--handlers",
        "handlers.py",
        "--input",
        "{}",
        "--signal",
        'go={"ok": 1}',
        "--json",
        cwd=work,
    )
    assert result.returncode == 0, result.stderr
    assert last_json(result.stdout)["context"] == {"hello": 1, "got": {"ok": 1}, "bye": True}


def test_run_registers_subflows(work):
    result = wiggle(
        "run",
        "parent.yaml",
        "--handlers",
        "handlers.py",
        "--input",
        "{}",
        "--register",
        "child.yaml",
        "--json",
        cwd=work,
    )
    assert result.returncode == 0, result.stderr
    assert last_json(result.stdout) == {
        "status": "COMPLETED",
        "context": {"hello": 1, "bye": True},
    }


def test_run_exits_1_when_the_instance_fails(work):
    result = wiggle(
        "run",
        "fails.yaml",
        "--handlers",
        "handlers.py",
        "--input",
        '{"why": "test"}',
        "--json",
        cwd=work,
    )
    assert result.returncode == 1
    assert last_json(result.stdout)["status"] == "FAILED"
    assert "boom: test" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["greet.yaml", "--handlers", "handlers.py", "--input", "{oops"],
            "--input is not valid JSON",
        ),
        (["greet.yaml", "--handlers", "missing.py"], "cannot load handlers"),
        (["greet.yaml", "--handlers", "no_such_module_x"], "cannot load handlers"),
        (["nowhere.yaml", "--handlers", "handlers.py"], "nowhere.yaml:1:1: cannot read"),
        (["greet.yaml", "--handlers", "handlers.py", "--signal", "nope"], "expected NAME=JSON"),
        (
            ["gate.yaml", "--handlers", "handlers.py", "--signal", "Go={}"],
            "flow 'gate' can never receive signal 'Go' (it awaits go)",
        ),
    ],
)
def test_run_reports_bad_arguments_clearly(work, args, message):
    result = wiggle("run", *args, cwd=work)
    assert result.returncode == 1
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_run_reports_a_bad_flow_with_positions(work):
    (work / "bad.yaml").write_text("wiggle: 1\nname: Bad Name\nsteps: []\n")
    result = wiggle("run", "bad.yaml", "--handlers", "handlers.py", cwd=work)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert lines and all(line.startswith("bad.yaml:") for line in lines)


def test_run_order_fulfilment_end_to_end(tmp_path):
    sample = {
        "order_id": "A-1001",
        "customer": "ada@example.com",
        "card": "4242424242424242",
        "items": [{"sku": "KB-01", "qty": 2, "price_cents": 4999}],
    }
    result = wiggle(
        "run",
        str(ROOT / "definitions" / "order-fulfilment.yaml"),
        "--handlers",
        str(ROOT / "definitions" / "handlers" / "order_fulfilment.py"),
        "--input",
        json.dumps(sample),
        "--json",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    final = last_json(result.stdout)
    assert final["status"] == "COMPLETED"
    assert final["context"]["order_id"] == "A-1001"


def test_run_refuses_activities_without_a_handler(work):
    (work / "lost.yaml").write_text("wiggle: 1\nname: lost\nsteps:\n  - task: nobody_home\n")
    result = wiggle("run", "lost.yaml", "--handlers", "handlers.py", "--input", "{}", cwd=work)
    assert result.returncode == 1
    assert "defines no activity named nobody_home" in result.stderr
    assert result.stdout == ""  # refused before anything started
