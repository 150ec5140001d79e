"""The worker as a process citizen: auth, TLS, its concurrency limit, stopping promptly."""

from __future__ import annotations

import logging
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.waiting import count_poll_retries, wait_until
from wiggle import errors
from wiggle.client import Client, TlsConfig
from wiggle.server import Server, ServerConfig
from wiggle.wire import Backoff
from wiggle.worker import Registry, Worker

pytestmark = pytest.mark.timeout(90)

ONE = "wiggle: 1\nname: one\nexecution: {mode}\nsteps: [{{task: hello}}, {{task: bye}}]\n"


def hello_registry() -> Registry:
    reg = Registry()
    reg.register(lambda ctx: {**ctx, "hello": True}, "hello")
    reg.register(lambda ctx: {**ctx, "bye": True}, "bye")
    return reg


@pytest.fixture
def other_server(stack):
    """A second server over the same engine, configured by the test; stopped afterwards."""
    servers: list[Server] = []

    def start(**config) -> Server:
        server = Server(stack.engine, ServerConfig(address="127.0.0.1:0", grace_s=0.5, **config))
        server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop(grace=0.2)


def test_a_token_is_sent_on_every_call(stack, other_server, caplog, monkeypatch):
    flow = stack.deploy(ONE.format(mode="LOCAL_SYNC"))
    guarded = other_server(token="s3cret")
    caplog.set_level(logging.ERROR, logger="wiggle.worker")
    refusals = count_poll_retries(monkeypatch)
    with Worker(guarded.address, registry=hello_registry(), poll_wait_ms=300):
        for _ in range(3):  # polls are refused: the worker has no token
            assert refusals.acquire(timeout=30), "the worker stopped polling"
    refused = [r for r in caplog.records if "UNAUTHENTICATED" in r.getMessage()]
    assert len(refused) == 1  # said once, not per attempt
    with Worker(guarded.address, registry=hello_registry(), token="s3cret", poll_wait_ms=300):
        started = stack.client.start(flow.name, {}, version=flow.version)
        view = stack.wait_finished(started.instance_id)
    assert view.status == "COMPLETED" and view.context == {"hello": True, "bye": True}


def _openssl(cwd: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _make_certs(d: Path) -> None:
    """A throwaway CA, a server certificate for 127.0.0.1 and a client certificate."""
    _openssl(
        d,
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=worker-test-ca",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
    )
    for name, ext in (
        ("srv", "subjectAltName=IP:127.0.0.1"),
        ("wrk", "extendedKeyUsage=clientAuth"),
    ):
        (d / f"{name}.ext").write_text(ext + "\n")
        _openssl(
            d,
            "req",
            "-new",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            f"/CN={name}",
            "-keyout",
            f"{name}.key",
            "-out",
            f"{name}.csr",
        )
        _openssl(
            d,
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "1",
            "-extfile",
            f"{name}.ext",
            "-out",
            f"{name}.crt",
        )


def test_mutual_tls(stack, other_server, tmp_path):
    _make_certs(tmp_path)
    flow = stack.deploy(ONE.format(mode="LOCAL_ASYNC"))
    secure = other_server(
        tls_cert=tmp_path / "srv.crt",
        tls_key=tmp_path / "srv.key",
        tls_client_ca=tmp_path / "ca.crt",
    )
    tls = TlsConfig(ca=tmp_path / "ca.crt", cert=tmp_path / "wrk.crt", key=tmp_path / "wrk.key")
    worker = Worker(secure.address, registry=hello_registry(), tls=tls, poll_wait_ms=300)
    with worker, Client(secure.address, tls=tls) as client:
        started = client.start(flow.name, {}, version=flow.version, worker=worker)
        view = client.wait(started.instance_id, timeout=30)
    assert view.status == "COMPLETED" and view.context == {"hello": True, "bye": True}


def test_never_more_steps_at_once_than_the_concurrency(stack):
    running = 0
    peak = 0
    lock = threading.Lock()
    reg = Registry()

    @reg.activity
    def hello(ctx):
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        time.sleep(0.2)
        with lock:
            running -= 1
        return ctx

    reg.register(lambda ctx: ctx, "bye")
    flow = stack.deploy(ONE.format(mode="SERVER"))
    ids = [stack.client.start(flow.name, {}, version=flow.version).instance_id for _ in range(8)]
    with Worker(stack.address, registry=reg, concurrency=3, poll_wait_ms=300):
        for instance_id in ids:
            assert stack.wait_finished(instance_id).status == "COMPLETED"
    assert peak == 3


def test_stop_returns_promptly_during_a_long_poll(stack):
    worker = Worker(stack.address, registry=hello_registry(), poll_wait_ms=30_000)
    worker.start()
    # The server records a polling worker as its long poll begins: the poll is open now.
    wait_until(
        lambda: worker.worker_id in [w.worker_id for w in stack.client.list_workers()[0]],
        30,
        "the worker's poll reaching the server",
    )
    began = time.monotonic()
    worker.stop()
    # Ended by the stop, not by the poll's 30 s: a bound far from both, whatever the load.
    assert time.monotonic() - began < 15.0
    assert not worker.running
    assert worker.reserve_eager_slot() is None


def test_a_worker_starts_once(stack):
    worker = Worker(stack.address, registry=hello_registry())
    worker.stop()  # stopping a worker that never started is harmless
    with pytest.raises(RuntimeError):
        worker.start()


def test_a_server_whose_database_is_away_is_polled_again_within_a_second(stack, monkeypatch):
    """A server answering UNAVAILABLE itself (its database failing over) is asked again at
    least every second: with the backoff of an unreachable server (up to 5 s) a worker sat idle
    for seconds after a 10 s failover was over (docs/scaling.md, the node killed).

    Judged on the pauses the poller chose between refused polls, not on the time between two
    polls: a loaded machine stretches that beyond the pause (a run of the whole suite saw 1.67 s
    after a pause of at most 1.2 s). Six refusals take the backoff past its cap: an unreachable
    server's backoff would have paused 1.28-1.92 s before the sixth poll."""
    refusals = 6
    polls = 0
    pauses: list[float] = []
    real_poll = stack.engine.poll
    real_delay = Backoff.next_delay

    def away(*args, **kwargs):
        nonlocal polls
        polls += 1
        if polls <= refusals:
            raise errors.Unavailable("the database is unavailable: connection refused")
        return real_poll(*args, **kwargs)

    def noted(backoff: Backoff) -> float:
        delay = real_delay(backoff)
        if threading.current_thread().name == "wiggle-poller":
            pauses.append(delay)
        return delay

    monkeypatch.setattr(stack.engine, "poll", away)
    monkeypatch.setattr(Backoff, "next_delay", noted)
    with Worker(stack.address, registry=hello_registry(), poll_wait_ms=300):
        wait_until(lambda: polls > refusals, 30, f"{refusals} refused polls and one more")
    assert len(pauses) >= refusals, pauses
    assert max(pauses) <= 1.2, [round(p, 2) for p in pauses]  # a second, and its jitter
