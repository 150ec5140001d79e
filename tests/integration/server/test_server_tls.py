"""TLS and mutual TLS over loopback, with throwaway certificates made by the openssl CLI."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from wiggle import errors
from wiggle.client import Client, TlsConfig


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _issue(name: str, ca: str, cwd: Path, *, server: bool) -> None:
    _openssl(
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
        cwd=cwd,
    )
    ext = cwd / f"{name}.ext"
    ext.write_text(
        "subjectAltName=DNS:localhost,IP:127.0.0.1\n" if server else "extendedKeyUsage=clientAuth\n"
    )
    _openssl(
        "x509",
        "-req",
        "-in",
        f"{name}.csr",
        "-CA",
        f"{ca}.crt",
        "-CAkey",
        f"{ca}.key",
        "-CAcreateserial",
        "-out",
        f"{name}.crt",
        "-days",
        "2",
        "-extfile",
        ext.name,
        cwd=cwd,
    )


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("certs")
    _openssl(
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
        "/CN=wiggle-test-ca",
        cwd=d,
    )
    _issue("server", "ca", d, server=True)
    _issue("client", "ca", d, server=False)
    return d


def test_tls(fake_engine, start_server, certs):
    server = start_server(fake_engine, tls_cert=certs / "server.crt", tls_key=certs / "server.key")
    with Client(server.address, tls=TlsConfig(ca=certs / "ca.crt"), retry_for=0) as client:
        assert client.signal("i1", "go") is True
    with Client(server.address, retry_for=0, timeout=5) as plain, pytest.raises(errors.Unavailable):
        plain.signal("i1", "go")


def test_mutual_tls(fake_engine, start_server, certs):
    server = start_server(
        fake_engine,
        tls_cert=certs / "server.crt",
        tls_key=certs / "server.key",
        tls_client_ca=certs / "ca.crt",
    )
    mine = TlsConfig(ca=certs / "ca.crt", cert=certs / "client.crt", key=certs / "client.key")
    with Client(server.address, tls=mine, retry_for=0) as client:
        assert client.signal("i1", "go") is True
    anonymous = TlsConfig(ca=certs / "ca.crt")
    client = Client(server.address, tls=anonymous, retry_for=0, timeout=5)
    with client, pytest.raises(errors.Unavailable):
        client.signal("i1", "go")


def test_a_client_certificate_identity_is_a_credential(fake_engine, start_server, certs):
    (certs / "credentials.toml").write_text(
        '[[credential]]\nname = "frontend"\nscopes = ["client"]\nmtls_identity = "client"\n'
    )
    server = start_server(
        fake_engine,
        tls_cert=certs / "server.crt",
        tls_key=certs / "server.key",
        tls_client_ca=certs / "ca.crt",
        credentials=certs / "credentials.toml",
    )
    mine = TlsConfig(ca=certs / "ca.crt", cert=certs / "client.crt", key=certs / "client.key")
    with Client(server.address, tls=mine, retry_for=0) as client:
        assert client.signal("i1", "go") is True  # a client may signal
        with pytest.raises(errors.PermissionDenied, match="'frontend'"):
            client.cancel("i1")  # but not cancel
