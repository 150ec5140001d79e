"""The Java worker over mutual TLS with a bearer token, against a real server.

Throwaway certificates from the openssl CLI: a CA, a server certificate for 127.0.0.1 and a
client certificate. The server requires the token and a client certificate the CA signed; the
Java conformance worker connects with WIGGLE_TLS_CA, WIGGLE_TLS_CERT, WIGGLE_TLS_KEY and
WIGGLE_AUTH_TOKEN, as the CLI would, and runs a local run to its end.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.waiting import wait_until
from wiggle.client import Client, Instance, TlsConfig
from wiggle.compiler import load_flow
from wiggle.engine import Engine
from wiggle.server import Server, ServerConfig

TOKEN = "java-tls-test-token"


def _openssl(cwd: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def tls_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("java-tls")
    _openssl(
        d,
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "2",
        "-subj",
        "/CN=wiggle-java-test-ca",
    )
    for name, ext in (
        ("server", "subjectAltName=IP:127.0.0.1,DNS:localhost\n"),
        ("client", "extendedKeyUsage=clientAuth\n"),
    ):
        _openssl(
            d,
            "req",
            "-new",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            f"{name}.key",
            "-out",
            f"{name}.csr",
            "-subj",
            f"/CN={name}",
        )
        (d / f"{name}.ext").write_text(ext)
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
            "-out",
            f"{name}.crt",
            "-days",
            "2",
            "-extfile",
            f"{name}.ext",
        )
    return d


@pytest.fixture
def server(tls_dir: Path, tmp_path: Path) -> Iterator[str]:
    engine = Engine(f"sqlite:///{tmp_path / 'tls.db'}")
    config = ServerConfig(
        address="127.0.0.1:0",
        token=TOKEN,
        tls_cert=tls_dir / "server.crt",
        tls_key=tls_dir / "server.key",
        tls_client_ca=tls_dir / "ca.crt",
        grace_s=1.0,
    )
    srv = Server(engine, config)
    port = srv.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        srv.stop(grace=0.5)
        engine.close()


def test_the_java_worker_runs_over_mutual_tls_with_a_token(
    server: str, tls_dir: Path, tmp_path: Path, java_worker_jar: Path
) -> None:
    tls = TlsConfig(ca=tls_dir / "ca.crt", cert=tls_dir / "client.crt", key=tls_dir / "client.key")
    client = Client(server, token=TOKEN, tls=tls)
    source = json.dumps(
        {
            "wiggle": 1,
            "name": "java-tls",
            "execution": "LOCAL_SYNC",
            "steps": [{"task": "append", "id": "a"}, {"task": "inc", "id": "b"}],
        }
    )
    client.deploy(load_flow(source.encode()))
    env = {
        **os.environ,
        "WIGGLE_ADDRESS": server,
        "WIGGLE_AUTH_TOKEN": TOKEN,
        "WIGGLE_TLS_CA": str(tls_dir / "ca.crt"),
        "WIGGLE_TLS_CERT": str(tls_dir / "client.crt"),
        "WIGGLE_TLS_KEY": str(tls_dir / "client.key"),
        "WIGGLE_CONFORMANCE_TRACE": str(tmp_path / "trace.jsonl"),
    }
    log = (tmp_path / "worker.log").open("wb")
    worker = subprocess.Popen(
        ["java", "-jar", str(java_worker_jar)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        started = client.start("java-tls", {})

        def finished() -> Instance | None:
            view = client.describe(started.instance_id)
            return view if view.status.finished else None

        view = wait_until(finished, 60, "the instance run by the Java worker over TLS")
        assert view.status == "COMPLETED", view.reason
        assert view.context == {"trail": ["a"], "n": 1}
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=30)
        log.close()
        client.close()
