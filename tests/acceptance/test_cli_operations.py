"""Day two, as a user meets it: `wiggle status` explains, `wiggle list`, `wiggle workers`, refused
signals and deploys, errors as JSON, an unreachable server. Each user story of the operations
issue is replayed here and ends with the user told what is wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clikit import TOKEN, Running, cli_env, wiggle

from tests.waiting import wait_until

HANDLERS = """\
from wiggle import activity

@activity
def score(ctx):
    return {**ctx, "score": 7}

@activity
def book(ctx):
    return {**ctx, "booked": True}
"""

APPROVAL = """\
wiggle: 1
name: approval
steps:
  - task: score
  - await: approve
    timeout: 1h
  - task: book
"""

LOANS = "wiggle: 1\nname: loans\nqueue: loans\nsteps:\n  - task: score\n"
ODD = "wiggle: 1\nname: odd\nsteps:\n  - task: appraise\n"
PARENT = "wiggle: 1\nname: parent\nsteps:\n  - task: score\n  - subflow: child\n"
CHILD = "wiggle: 1\nname: child\nsteps:\n  - task: book\n"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "handlers.py").write_text(HANDLERS)
    for name, text in {
        "approval.yaml": APPROVAL,
        "loans.yaml": LOANS,
        "odd.yaml": ODD,
        "parent.yaml": PARENT,
        "child.yaml": CHILD,
    }.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def _worker(address: str, work: Path, *args: str) -> Running:
    return Running(
        ["worker", "--handlers", "handlers.py", *args],
        work,
        cli_env(WIGGLE_ADDRESS=address, WIGGLE_AUTH_TOKEN=TOKEN),
    )


def _workers_once_polled(address: str, work: Path) -> list[dict]:
    """`wiggle workers --json`, once the worker just started has polled (its first poll may
    still be on its way)."""

    def listed() -> list[dict]:
        return json.loads(_ok(wiggle(address, "workers", "--json", cwd=work)).stdout)["workers"]

    return wait_until(listed, 60, "the worker's first poll", interval=0.1)


def _ok(result):
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def _status_json(address: str, work: Path, iid: str) -> dict:
    return json.loads(_ok(wiggle(address, "status", iid, "--json", cwd=work)).stdout)


def _wait_for_token(address, work, iid, pred):
    def reached() -> dict | None:
        view = _status_json(address, work, iid)
        assert view["status"] == "RUNNING", view
        live = [t for t in view["tokens"] if t["state"] != "DONE"]
        return view if live and pred(live[0]) else None

    return wait_until(reached, 60, f"the token of {iid} in the state asked for", interval=0.1)


def test_status_shows_the_current_context_and_what_the_token_waits_for(server, work):
    """An approver must see the score an earlier step added, not the start input."""
    address, _ = server
    _ok(wiggle(address, "deploy", "approval.yaml", cwd=work))
    worker = _worker(address, work)
    try:
        _ok(
            wiggle(
                address, "start", "approval", "--id", "a1", "--input", '{"who": "ada"}', cwd=work
            )
        )
        view = _wait_for_token(address, work, "a1", lambda t: t["state"] == "AWAITING")
    finally:
        assert worker.stop() == 0
    assert view["context"] == {"who": "ada", "score": 7}
    assert view["input"] == {"who": "ada"}
    (token,) = [t for t in view["tokens"] if t["state"] == "AWAITING"]
    assert token["context"] == {"who": "ada", "score": 7}
    assert token["explanation"].startswith("waiting for signal `approve` since ")
    assert "then the flow goes on without it" in token["explanation"]

    text = _ok(wiggle(address, "status", "a1", cwd=work)).stdout
    assert 'context   {"who":"ada","score":7} (at approve)' in text
    assert "waiting for signal `approve` since" in text


def test_render_an_instance_with_its_token_states(server, work):
    address, _ = server
    _ok(wiggle(address, "deploy", "approval.yaml", cwd=work))
    worker = _worker(address, work)
    try:
        _ok(wiggle(address, "start", "approval", "--id", "r1", "--input", "{}", cwd=work))
        _wait_for_token(address, work, "r1", lambda t: t["state"] == "AWAITING")
    finally:
        assert worker.stop() == 0
    dot = _ok(wiggle(address, "render", "--instance", "r1", "-o", "-", "-f", "dot", cwd=work))
    assert '"approve"' in dot.stdout and "AWAITING" in dot.stdout and "DONE 1" in dot.stdout
    written = _ok(wiggle(address, "render", "--instance", "r1", cwd=work))
    assert written.stdout.strip() == "r1.svg" and (work / "r1.svg").exists()
    missing = wiggle(address, "render", "--instance", "nope", cwd=work)
    assert missing.returncode == 1 and "no instance with id 'nope'" in missing.stderr


def test_a_misspelled_signal_is_refused_with_the_names_awaited(server, work):
    address, _ = server
    _ok(wiggle(address, "deploy", "approval.yaml", cwd=work))
    _ok(wiggle(address, "start", "approval", "--id", "s1", cwd=work))
    sent = wiggle(address, "signal", "s1", "aprove", "--payload", "{}", cwd=work)
    assert sent.returncode == 1
    assert "can never receive signal 'aprove': it awaits 'approve'" in sent.stderr
    as_json = wiggle(address, "signal", "s1", "aprove", "--json", cwd=work)
    assert as_json.returncode == 1
    error = json.loads(as_json.stdout)["error"]
    assert error["code"] == "SIGNAL_NOT_AWAITED" and "it awaits 'approve'" in error["message"]


def test_a_task_on_a_queue_no_worker_serves_says_so(server, work):
    """A worker started without `--queue loans` left an instance READY and nothing said why."""
    address, _ = server
    _ok(wiggle(address, "deploy", "loans.yaml", cwd=work))
    worker = _worker(address, work)  # serves `default` only
    try:
        assert [w["queues"] for w in _workers_once_polled(address, work)] == [["default"]]
        _ok(wiggle(address, "start", "loans", "--id", "l1", cwd=work))
        view = _status_json(address, work, "l1")
    finally:
        assert worker.stop() == 0
    (token,) = view["tokens"]
    assert token["state"] == "READY"
    assert "no worker has polled `loans` in the last 30 s" in token["explanation"]


def test_a_task_whose_activity_no_worker_has_says_so(server, work):
    """A worker missing one activity used to fail another flow's instance after 3 attempts. It
    is never handed that task now, and status names the missing activity."""
    address, _ = server
    _ok(wiggle(address, "deploy", "odd.yaml", cwd=work))
    worker = _worker(address, work)
    try:
        _workers_once_polled(address, work)
        listed = _ok(wiggle(address, "workers", cwd=work)).stdout
        assert "default" in listed and "book,score" in listed
        _ok(wiggle(address, "start", "odd", "--id", "o1", cwd=work))
        text = _ok(wiggle(address, "status", "o1", cwd=work)).stdout
    finally:
        assert worker.stop() == 0
    assert "status    RUNNING" in text
    assert "the workers polling `default` do not have activity `appraise`" in text


def test_list_newest_first_with_counts_pages_and_json(server, work):
    address, _ = server
    _ok(wiggle(address, "deploy", "approval.yaml", cwd=work))
    for n in range(3):
        _ok(wiggle(address, "start", "approval", "--id", f"p{n}", cwd=work))
    _ok(wiggle(address, "cancel", "p0", cwd=work))
    text = _ok(wiggle(address, "list", "--limit", "2", cwd=work)).stdout
    lines = text.splitlines()
    assert lines[0].split()[:4] == ["INSTANCE", "FLOW", "STATUS", "STEP"]
    assert [line.split()[:4] for line in lines[1:3]] == [
        ["p2", "approval", "RUNNING", "score"],  # no worker: both wait at their first step
        ["p1", "approval", "RUNNING", "score"],
    ]
    assert "matching: running 2  completed 0  failed 0  cancelled 1" in text
    token = text.split("more: add --page ")[1].split()[0]
    rest = json.loads(_ok(wiggle(address, "list", "--page", token, "--json", cwd=work)).stdout)
    assert [i["instance_id"] for i in rest["instances"]] == ["p0"]
    assert rest["next_page_token"] == ""
    running = json.loads(
        _ok(wiggle(address, "list", "--status", "running", "--json", cwd=work)).stdout
    )
    assert {i["instance_id"] for i in running["instances"]} == {"p1", "p2"}
    assert {i["current_node"] for i in running["instances"]} == {"score"}
    assert [i["current_node"] for i in rest["instances"]] == [""]  # cancelled: nowhere
    bad = wiggle(address, "list", "--since", "yesterday", cwd=work)
    assert bad.returncode == 1 and "--since 'yesterday'" in bad.stderr


def test_deploy_refuses_an_unregistered_subflow_target_with_its_position(server, work):
    address, _ = server
    refused = wiggle(address, "deploy", "parent.yaml", cwd=work)
    assert refused.returncode == 1
    assert refused.stderr.startswith(
        "parent.yaml:5:14: subflow target 'child' is neither registered on the server nor in "
        "this deploy"
    )
    listed = json.loads(_ok(wiggle(address, "list", "--json", cwd=work)).stdout)
    assert listed["instances"] == []
    both = _ok(wiggle(address, "deploy", "parent.yaml", "child.yaml", cwd=work)).stdout
    assert [line.split()[0] for line in both.splitlines()] == ["child", "parent"]
    _ok(wiggle(address, "deploy", "parent.yaml", cwd=work))  # registered now


def test_errors_are_json_documents_with_json(server, work):
    address, _ = server
    missing = wiggle(address, "status", "nope", "--json", cwd=work)
    assert missing.returncode == 1
    assert json.loads(missing.stdout) == {
        "error": {"code": "INSTANCE_NOT_FOUND", "message": "no instance with id 'nope'"}
    }
    usage = wiggle(address, "list", "--limit", "many", "--json", cwd=work)
    assert usage.returncode == 2
    assert json.loads(usage.stdout)["error"]["code"] == "USAGE"


def test_an_unreachable_server_is_named_with_a_hint(work):
    result = wiggle("127.0.0.1:1", "status", "x", "--json", cwd=work)
    assert result.returncode == 1
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "UNAVAILABLE"
    assert "cannot reach the Wiggle server at 127.0.0.1:1" in error["message"]
    assert "wiggle server" in error["hint"] and "--address" in error["hint"]
    assert "Traceback" not in result.stderr
