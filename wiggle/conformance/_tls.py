"""Throwaway TLS material for the runner's TLS session: a CA and a certificate for localhost.

Made with the openssl command (setup installs it), valid for two days, in a directory the
runner deletes afterwards. A worker under test trusts the CA through WIGGLE_TLS_CA.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Certificates", "make_certificates"]


@dataclass(frozen=True)
class Certificates:
    ca: Path  # the CA certificate a client trusts
    cert: Path  # the server's certificate, for localhost and 127.0.0.1
    key: Path  # its private key


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_certificates(directory: Path) -> Certificates:
    directory.mkdir(parents=True, exist_ok=True)
    key = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl(
        "req", "-x509", *key, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
        "-subj", "/CN=wiggle-conformance-ca", cwd=directory,
    )  # fmt: skip
    _openssl(
        "req", "-new", *key, "-keyout", "server.key", "-out", "server.csr",
        "-subj", "/CN=localhost", cwd=directory,
    )  # fmt: skip
    (directory / "server.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    _openssl(
        "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "server.crt", "-days", "2", "-extfile", "server.ext",
        cwd=directory,
    )  # fmt: skip
    return Certificates(directory / "ca.crt", directory / "server.crt", directory / "server.key")
