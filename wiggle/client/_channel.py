"""Opening a channel to a Wiggle server: TLS, the bearer token, message limits."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import grpc

__all__ = ["TlsConfig", "open_channel", "token_metadata"]

#: Responses can carry many tasks or a large context: accept far more than gRPC's 4 MiB default.
MAX_RECEIVE_BYTES = 256 * 1024 * 1024


def _read(value: str | os.PathLike[str] | bytes | None) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    return Path(value).read_bytes()


@dataclass(frozen=True)
class TlsConfig:
    """TLS towards the server. Paths or PEM bytes; every field optional.

    `ca` verifies the server (default: the system roots); `cert` + `key` are this client's
    certificate for mutual TLS; `server_name` overrides the name checked against the server's
    certificate (useful when connecting by IP address).
    """

    ca: str | os.PathLike[str] | bytes | None = None
    cert: str | os.PathLike[str] | bytes | None = None
    key: str | os.PathLike[str] | bytes | None = None
    server_name: str | None = None

    def credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            root_certificates=_read(self.ca),
            private_key=_read(self.key),
            certificate_chain=_read(self.cert),
        )


def token_metadata(token: str | None) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),) if token else ()


def open_channel(address: str, tls: TlsConfig | None = None) -> grpc.Channel:
    options: list[tuple[str, str | int]] = [
        ("grpc.max_receive_message_length", MAX_RECEIVE_BYTES),
        ("grpc.max_send_message_length", -1),
    ]
    if tls is None:
        return grpc.insecure_channel(address, options=options)
    if tls.server_name:
        options.append(("grpc.ssl_target_name_override", tls.server_name))
    return grpc.secure_channel(address, tls.credentials(), options=options)
