"""A free loopback port for a process about to be started, which binds it itself.

A port the kernel hands out for `bind(("127.0.0.1", 0))` comes from its ephemeral range, the
same range every outgoing connection takes its local port from. Closed again so that the child
can bind it, it is free for anyone: on a busy machine (a test suite opening thousands of
PostgreSQL and gRPC connections) an outgoing connection took one before the child did, and the
child failed with "Address already in use". A port below that range is never given to an
outgoing connection, so only a process that listens on a port it chose can take it meanwhile.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

__all__ = ["free_port"]

#: The lowest port picked: above the registered services most machines run.
_LOWEST = 10000
_TRIES = 200


def _ephemeral_low() -> int:
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default; macOS's range starts at 49152
    return low


def free_port(host: str = "127.0.0.1") -> int:
    """A port of `host` that nothing listens on now, below the ephemeral range when there is
    room there (else one the kernel picks)."""
    high = _ephemeral_low() - 1
    for _ in range(_TRIES if high > _LOWEST else 0):
        port = random.randint(_LOWEST, high)
        with socket.socket() as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue  # listened on, or bound by someone: try another
            return port
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
