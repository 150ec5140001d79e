"""The whole corpus through the runner: every case, every mode, against each SDK's conformance
worker as a subprocess (Python, Go, Java and TypeScript; the others are built first when missing
or stale), and against the embedded worker (the Python worker in the runner's process, calling
its node in process: wiggle.embedded's layout). Any failing case fails the test, with the
runner's table of failures as the message. This is the only place the whole corpus runs in
scripts/test.sh.

Which databases: each worker runs the corpus on one database in scripts/test.sh, and each
database meets two workers (Python and Java on PostgreSQL, Go, TypeScript and the embedded one
on SQLite). A worker
talks to the server alone, never to the database: what a second database would add for it is the
server's timing on that database, which the other worker's runs there already meet, and the
server's own behaviour on each database is the integration suite's, on both. The runs left
out cost a third of the test command's time. `bash scripts/corpus.sh` (WIGGLE_CORPUS=full) runs
every worker on both."""

from __future__ import annotations

import ipaddress
import os
import socket
import textwrap
from pathlib import Path
from typing import Any

import pytest

from wiggle.cli import main
from wiggle.conformance import (
    EMBEDDED_WORKER,
    MODES,
    PYTHON_WORKER,
    RunnerOptions,
    format_table,
    load_cases,
    run_corpus,
    summarise,
)
from wiggle.conformance._databases import fresh_databases
from wiggle.conformance._session import MAIN_QUEUES, SIDE_QUEUES, Session

# Three modes on one database take about a minute on a two-core machine; more when it is busy.
CORPUS_TIMEOUT_S = 900

WORKERS = ("python", "go", "java", "typescript", "embedded")
DATABASES = ("sqlite", "postgres")

#: Each worker's databases in scripts/test.sh (the module's docstring says why).
SHORT = {
    "python": ("postgres",),
    "go": ("sqlite",),
    "java": ("postgres",),
    "typescript": ("sqlite",),
    "embedded": ("sqlite",),
}

#: scripts/corpus.sh: every worker on every database.
FULL = os.environ.get("WIGGLE_CORPUS", "") == "full"


def _matrix() -> list[Any]:
    return [
        pytest.param(
            worker,
            database,
            id=f"{worker}-{database}",
            marks=[pytest.mark.postgres] if database == "postgres" else [],
        )
        for worker in WORKERS
        for database in DATABASES
        if FULL or database in SHORT[worker]
    ]


@pytest.fixture
def worker_command(request: pytest.FixtureRequest, worker: str) -> str:
    """The command that starts the conformance worker of `worker`'s SDK."""
    if worker == "python":
        return PYTHON_WORKER
    if worker == "embedded":
        return EMBEDDED_WORKER
    return str(request.getfixturevalue(f"{worker}_worker"))


def test_every_worker_runs_the_corpus_and_each_database_meets_two_languages():
    assert set(SHORT) == set(WORKERS) and all(SHORT.values())
    for database in DATABASES:
        assert len([w for w, databases in SHORT.items() if database in databases]) >= 2, database


@pytest.mark.timeout(CORPUS_TIMEOUT_S)
@pytest.mark.parametrize(("worker", "database"), _matrix())
def test_corpus(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    worker: str,
    worker_command: str,
    database: str,
) -> None:
    if database == "postgres":
        # The runner makes a fresh database per mode next to this session's server.
        monkeypatch.setenv("WIGGLE_TEST_POSTGRES_URL", request.getfixturevalue("postgres_url"))
    cases = load_cases()
    results = run_corpus(
        cases,
        RunnerOptions(modes=MODES, databases=[database], worker=worker_command, verbose=True),
    )
    rows = summarise(results)
    failed = [r for r in rows if not r.passed]
    assert len(rows) == len(cases) * (len(MODES) + 1)
    assert not failed, "\n" + format_table(failed)


WRONG = """\
id: wrong/expectation
description: A case whose expected context is deliberately wrong.
flow:
  wiggle: 1
  name: wrong-expectation
  steps:
    - {task: append, id: a}
runs:
  - input: {}
    expect:
      status: COMPLETED
      context: {trail: [not-a]}
      steps: {a: 1}
"""


def test_the_runner_reports_a_wrong_expectation(tmp_path: Path, capsys):
    (tmp_path / "wrong.yaml").write_text(textwrap.dedent(WRONG))
    code = main(["conformance", "--modes", "SERVER", "--cases", str(tmp_path / "*.yaml")])
    out = capsys.readouterr().out
    assert code == 1
    assert out.splitlines()[-1] == "0 passed, 1 failed"
    assert 'expected {"trail":["not-a"]}' in out


def test_the_runner_passes_a_right_expectation_and_modes_agree(tmp_path: Path, capsys):
    right = WRONG.replace("[not-a]", "[a]").replace("wrong", "right")
    (tmp_path / "right.yaml").write_text(right)
    code = main(
        ["conformance", "--modes", "SERVER,LOCAL_ASYNC", "--cases", str(tmp_path / "*.yaml")]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.splitlines()[-1] == "3 passed, 0 failed"
    assert "(modes agree)" in out


def test_the_runner_reports_a_step_run_too_often(tmp_path: Path, capsys):
    wrong = WRONG.replace("context: {trail: [not-a]}", "context: {trail: [a]}").replace(
        "steps: {a: 1}", "steps: {a: 2}"
    )
    (tmp_path / "steps.yaml").write_text(wrong)
    code = main(["conformance", "--modes", "LOCAL_SYNC", "--cases", str(tmp_path / "*.yaml")])
    out = capsys.readouterr().out
    assert code == 1
    assert "step a ran 1 times; expected 2" in out
    assert out.splitlines()[-1] == "0 passed, 1 failed"


def test_a_slow_starting_worker_is_waited_for_before_any_case(tmp_path: Path):
    # A worker whose runtime takes seconds to start (a JVM) polls late. The session waits for
    # the first poll of each of its workers before it lets a case start; before it did, a case's
    # clock ran while the worker booted.
    worker = f"sh -c 'sleep 2; exec {PYTHON_WORKER}'"
    options = RunnerOptions(modes=["SERVER"], databases=["sqlite"], worker=worker)
    with fresh_databases("sqlite") as new_database:
        session = Session(new_database(), "SERVER", "sqlite", options, tmp_path)
        try:
            with session.worker_process("slow-boot"):
                assert session.recorder.polls_seen(tuple(MAIN_QUEUES.split(","))) >= 1
                assert session.recorder.polls_seen((SIDE_QUEUES,)) >= 1
        finally:
            session.close()


def test_the_tls_worker_is_given_the_one_address_its_server_bound(tmp_path: Path):
    # A name is resolved differently by gRPC's C core (localhost: ::1 and 127.0.0.1) and by a
    # JVM (/etc/hosts: 127.0.0.1). A TLS server on "localhost:0" that got ::1:P while another
    # process held 127.0.0.1:P listened where the Java worker never looked: the worker spoke to
    # that other process and never polled (a corpus run on a busy machine). The worker must be
    # given the literal address the server bound.
    seen = tmp_path / "address"
    worker = f"sh -c 'echo \"$WIGGLE_ADDRESS\" > {seen}; exec {PYTHON_WORKER}'"
    options = RunnerOptions(modes=["SERVER"], databases=["sqlite"], worker=worker)
    with fresh_databases("sqlite") as new_database:
        session = Session(new_database(), "SERVER", "sqlite", options, tmp_path)
        try:
            with session.worker_process("main"), session.tls_worker("tls"):
                host, _, port = seen.read_text().strip().rpartition(":")
                assert ipaddress.ip_address(host).is_loopback
                with socket.create_connection((host, int(port)), timeout=5):
                    pass
        finally:
            session.close()
