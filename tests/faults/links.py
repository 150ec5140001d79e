"""TCP links on loopback that a scenario can break: reset every connection now and then, or cut
the link as a network partition would.

`Link(upstream)` listens on 127.0.0.1:`port` and forwards each connection to `upstream`. `cut()`
makes it a partition: nothing crosses any more, in either direction, and new connections are
accepted and then left silent, so the peers see no error, only silence, until their own
timeouts give up (no reset, no refusal: what a dropped network looks like from both ends).
`mend()` ends the partition: the connections that lived through it are reset (a peer
reconnects), new ones are forwarded again. `ResettingProxy` resets every connection through it
every `low`-`high` seconds, as on a flaky network.
"""

from __future__ import annotations

import random
import select
import socket
import struct
import threading

__all__ = ["Link", "ResettingProxy"]


class Link:
    """A TCP forwarder from 127.0.0.1:`port` to `upstream` (`HOST:PORT`)."""

    def __init__(self, upstream: str) -> None:
        host, port = upstream.rsplit(":", 1)
        self._upstream = (host, int(port))
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self.port = int(self._listener.getsockname()[1])
        self.address = f"127.0.0.1:{self.port}"
        self._lock = threading.Lock()
        self._socks: set[socket.socket] = set()
        self._stop = threading.Event()
        self._cut = threading.Event()
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    # -- forwarding ---------------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._cut.is_set():  # accepted, and then nothing: a partition's silence
                with self._lock:
                    self._socks.add(client)
                continue
            try:
                upstream = socket.create_connection(self._upstream, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._socks.update((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        peers = {a: b, b: a}
        try:
            while not self._stop.is_set():
                ready, _, _ = select.select([a, b], [], [], 0.5)
                for s in ready:
                    data = s.recv(65536)
                    if not data:
                        return
                    if not self._cut.is_set():  # cut: what was sent is lost on the way
                        peers[s].sendall(data)
        except (OSError, ValueError):  # reset under us: a closed socket has no descriptor
            return
        finally:
            self._drop(a, b)

    def _drop(self, *socks: socket.socket) -> None:
        with self._lock:
            for s in socks:
                self._socks.discard(s)
        for s in socks:
            try:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.close()
            except OSError:
                pass

    def reset_all(self) -> int:
        """Reset (RST) every connection through the link now; returns how many sockets."""
        with self._lock:
            socks = list(self._socks)
        self._drop(*socks)
        return len(socks)

    # -- what a scenario does -----------------------------------------------------------------

    def cut(self) -> None:
        """A partition: nothing crosses from now on, and no peer is told."""
        self._cut.set()

    def mend(self) -> None:
        """The partition heals: connections that lived through it are reset, new ones cross."""
        self._cut.clear()
        self.reset_all()

    @property
    def is_cut(self) -> bool:
        return self._cut.is_set()

    def close(self) -> None:
        self._stop.set()
        self._listener.close()
        self.reset_all()


class ResettingProxy(Link):
    """A link that resets every connection through it every `low`-`high` seconds.

    Connections are closed with SO_LINGER 0, so the peers see a reset (RST) mid-call, as on a
    flaky network; new connections are accepted at once.
    """

    def __init__(self, upstream: str, low: float = 0.2, high: float = 0.6, seed: int = 7) -> None:
        super().__init__(upstream)
        self._low, self._high = low, high
        self._random = random.Random(seed)
        self.resets = 0
        resetter = threading.Thread(target=self._reset_loop, daemon=True)
        self._threads.append(resetter)
        resetter.start()

    def _reset_loop(self) -> None:
        while not self._stop.wait(self._random.uniform(self._low, self._high)):
            if self.reset_all():
                self.resets += 1
