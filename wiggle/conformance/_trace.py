"""The trace file the conformance activities append to, read incrementally by the runner."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import orjson

__all__ = ["Trace", "TraceLine"]


@dataclass(frozen=True)
class TraceLine:
    seq: int  # position in the file, from 0: "after the run started" is seq >= a mark
    instance_id: str
    flow: str
    node_id: str
    activity: str
    attempt: int


class Trace:
    """All lines written so far; `refresh()` reads what was appended since the last call.

    Shared by the runner's threads: every case reads the same file and picks its own lines by
    instance id (or, for child instances not yet known, by flow name, unique to one case).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        path.touch()
        self._lock = threading.Lock()
        self._offset = 0
        self._partial = b""
        self._lines: list[TraceLine] = []

    def refresh(self) -> int:
        """Read new complete lines; returns how many lines there are in all."""
        with self._lock:
            with self.path.open("rb") as f:
                f.seek(self._offset)
                data = f.read()
            self._offset += len(data)
            data = self._partial + data
            *complete, self._partial = data.split(b"\n")
            for raw in complete:
                if not raw.strip():
                    continue
                try:
                    d = orjson.loads(raw)
                    line = TraceLine(
                        len(self._lines),
                        str(d["instance_id"]),
                        str(d["flow"]),
                        str(d["node_id"]),
                        str(d["activity"]),
                        int(d["attempt"]),
                    )
                except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                    continue  # a torn line from a killed writer is not an execution we can place
                self._lines.append(line)
            return len(self._lines)

    def since(self, mark: int) -> list[TraceLine]:
        with self._lock:
            return self._lines[mark:]
