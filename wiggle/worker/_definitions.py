"""Pinned definitions a LOCAL run needs, fetched once per version and cached.

A worker that cannot get (or read) the pinned version runs the task in SERVER mode instead:
slower, never wrong. A failed fetch is remembered for a short while so a missing definition
does not cost a GetDefinition per task.
"""

from __future__ import annotations

import logging
import threading
import time

from wiggle._proto.wiggle.v1 import wiggle_pb2 as pb
from wiggle.graph import Graph
from wiggle.worker._rpc import Rpc, RpcFailed

__all__ = ["DefinitionCache"]

_log = logging.getLogger("wiggle.worker")

#: How long a failed fetch is remembered before the worker asks again.
_NEGATIVE_TTL_S = 10.0


class DefinitionCache:
    def __init__(self, rpc: Rpc) -> None:
        self._rpc = rpc
        self._lock = threading.Lock()
        self._graphs: dict[str, Graph] = {}
        self._failed: dict[str, float] = {}
        self._fetching: dict[str, threading.Lock] = {}

    def put(self, graph: Graph) -> None:
        """Seed the cache (a worker embedded next to the compiler already has the graph)."""
        with self._lock:
            self._graphs[graph.version] = graph

    def get(self, flow: str, version: str) -> Graph | None:
        """The graph of `flow` at `version`, or None when it cannot be had right now."""
        with self._lock:
            known, graph = self._cached(version)
            if known:
                return graph
            fetching = self._fetching.setdefault(version, threading.Lock())
        # One fetch per version at a time: the tasks of a burst that all need the same unknown
        # version wait for the first fetch instead of each asking the server.
        with fetching:
            with self._lock:
                known, graph = self._cached(version)
            if known:
                return graph
            graph = self._fetch(flow, version)
            with self._lock:
                if graph is None:
                    self._failed[version] = time.monotonic()
                else:
                    self._graphs[version] = graph
                    self._failed.pop(version, None)
        return graph

    def _cached(self, version: str) -> tuple[bool, Graph | None]:
        """(True, graph) when cached, (True, None) while a failure is remembered; call locked."""
        graph = self._graphs.get(version)
        if graph is not None:
            return True, graph
        failed_at = self._failed.get(version)
        if failed_at is not None and time.monotonic() - failed_at < _NEGATIVE_TTL_S:
            return True, None
        return False, None

    def _fetch(self, flow: str, version: str) -> Graph | None:
        try:
            definition = self._rpc.call(
                "GetDefinition", pb.GetDefinitionRequest(name=flow, version=version), retry_for=5.0
            )
        except RpcFailed as exc:
            _log.warning(
                "cannot fetch %s@%s (%s); running its tasks in SERVER mode", flow, version, exc
            )
            return None
        try:
            from wiggle.compiler import graph_from_canonical

            compiled = graph_from_canonical(bytes(definition.graph))
        except Exception as exc:  # FlowError, or a compiler that is not there
            _log.warning(
                "cannot read %s@%s (%s); running its tasks in SERVER mode", flow, version, exc
            )
            return None
        if compiled.version != version:
            # The server handed us other bytes than the pinned version: never chain on them.
            _log.warning(
                "definition %s@%s hashes to %s; running its tasks in SERVER mode",
                flow,
                version,
                compiled.version,
            )
            return None
        graph: Graph = compiled.graph
        return graph
