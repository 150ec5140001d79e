"""wiggle._ports.free_port: a port for a child to bind, which no outgoing connection takes."""

from __future__ import annotations

import socket

from wiggle import _ports


def test_the_port_is_below_the_ephemeral_range():
    # bind(0) gives a port from the range outgoing connections use: a busy suite's connection
    # took one between the pick and the child's bind (run 26, "Address already in use").
    low = _ports._ephemeral_low()
    for _ in range(50):
        port = _ports.free_port()
        assert _ports._LOWEST <= port < low


def test_a_port_something_listens_on_is_not_picked(monkeypatch):
    pick = _ports.random.randint
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        offered = iter([busy, busy])  # the busy port twice, then random picks again
        monkeypatch.setattr(
            _ports.random, "randint", lambda a, b: next(offered, None) or pick(a, b)
        )
        port = _ports.free_port()
        assert port != busy
        with socket.socket() as check:
            check.bind(("127.0.0.1", port))  # free indeed
