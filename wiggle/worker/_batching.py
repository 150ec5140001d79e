"""Reports of concurrent tasks sent together: one ReportBatch RPC carries many.

A worker running many tasks at once reports each step (LOCAL_SYNC: every step before the next
runs; SERVER: every step's CompleteTask). Most of a report's cost, on both sides, is the RPC
itself, so reports made while a batch is in flight queue up and go together in the next one
(docs/worker-protocol.md, "Batched reports"). A lone report is sent at once: batching never
delays the first report, it only groups the ones that would otherwise wait their turn.

The caller sees exactly what its own RPC would have given it: the answer, or an error carrying
the status code, details and `wiggle-error-code` trailer the single call would have failed
with, so retries (a resend keeps its seq) and error handling do not know batching exists.
A server without ReportBatch (UNIMPLEMENTED) turns batching off for good: reports go one RPC
each again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

import grpc

from wiggle._group import GroupCommit
from wiggle._proto.wiggle.v1 import wiggle_pb2 as pb
from wiggle.wire import ERROR_CODE_KEY, REPORT_FIELDS

__all__ = ["ReportBatcher"]

_log = logging.getLogger("wiggle.worker")

#: A batch is split before it would exceed this many bytes, or the server's own request limit
#: when a task said it is smaller (a report over it travels alone).
MAX_BATCH_BYTES = 4 * 1024 * 1024

_CODES = {code.value[0]: code for code in grpc.StatusCode}

_Item = tuple[str, Any, float]  # (method, request, timeout)


class BatchedCallError(grpc.RpcError):
    """A report refused inside a batch, shaped like the error its own RPC would have raised."""

    def __init__(self, code: grpc.StatusCode, details: str, error_code: str = "") -> None:
        super().__init__(details)
        self._code = code
        self._details = details
        self._trailers = ((ERROR_CODE_KEY, error_code),) if error_code else ()

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> Any:  # (key, value) pairs, as grpc gives them
        return self._trailers


class _Unbatched(Exception):
    """The server does not implement ReportBatch: the caller sends its report alone."""


class ReportBatcher:
    """Sends the reports of concurrent callers in ReportBatch calls (one in flight at a time)."""

    def __init__(self, stub: Any, metadata: Sequence[tuple[str, str]] = ()) -> None:
        self._stub = stub
        self._metadata = tuple(metadata)
        self._group: GroupCommit[_Item, Any] = GroupCommit(self._send, max_batch=256)
        self.enabled = callable(getattr(stub, "ReportBatch", None))
        self._said_off = threading.Event()
        self.max_bytes = MAX_BATCH_BYTES
        self.calls = 0  # ReportBatch RPCs sent (for tests and benchmarks)

    def note_limit(self, max_request_bytes: int) -> None:
        """The server's request limit, as a task carried it: no batch is built larger."""
        if 0 < max_request_bytes < self.max_bytes:
            self.max_bytes = max_request_bytes

    def call(self, method: str, request: Any, timeout: float) -> Any:
        """The answer to report `request` of `method`, or raise as its own RPC would."""
        if not self.enabled or method not in REPORT_FIELDS:
            return getattr(self._stub, method)(request, timeout=timeout, metadata=self._metadata)
        try:
            return self._group.submit((method, request, timeout))
        except _Unbatched:
            return getattr(self._stub, method)(request, timeout=timeout, metadata=self._metadata)

    def _send(self, items: Sequence[_Item]) -> list[Any]:
        if not self.enabled:
            return [_Unbatched()] * len(items)
        out: list[Any] = []
        for chunk in _chunks(items, self.max_bytes):
            out.extend(self._send_chunk(chunk))
        return out

    def _send_chunk(self, items: Sequence[_Item]) -> list[Any]:
        reports = [pb.TaskReport(**{REPORT_FIELDS[m]: request}) for m, request, _ in items]
        timeout = min(t for _, _, t in items)
        try:
            self.calls += 1
            response = self._stub.ReportBatch(
                pb.ReportBatchRequest(reports=reports), timeout=timeout, metadata=self._metadata
            )
        except grpc.RpcError as exc:
            code = exc.code() if callable(getattr(exc, "code", None)) else None
            if code is grpc.StatusCode.RESOURCE_EXHAUSTED and len(items) > 1:
                # Too big together (the limit was not known yet): never let one report's size
                # spoil the others; each goes alone and gets its own answer.
                return [answer for item in items for answer in self._send_chunk([item])]
            if code is grpc.StatusCode.UNIMPLEMENTED:
                self.enabled = False
                if not self._said_off.is_set():
                    self._said_off.set()
                    _log.info("server does not implement ReportBatch; reporting one RPC each")
                return [_Unbatched()] * len(items)
            return [exc] * len(items)  # the whole call failed: each caller retries as usual
        answers = list(response.answers)
        if len(answers) != len(items):
            broken = BatchedCallError(
                grpc.StatusCode.INTERNAL,
                f"ReportBatch answered {len(answers)} reports for {len(items)} sent",
            )
            return [broken] * len(items)
        return [_unpack(answer) for answer in answers]


def _unpack(answer: pb.TaskReportAnswer) -> Any:
    which = answer.WhichOneof("answer")
    if which == "task":
        return answer.task
    if which == "advance":
        return answer.advance
    if which == "error":
        err = answer.error
        code = _CODES.get(err.status_code, grpc.StatusCode.UNKNOWN)
        return BatchedCallError(code, err.message, err.error_code)
    return BatchedCallError(grpc.StatusCode.INTERNAL, "ReportBatch answered a report with nothing")


def _entry_bytes(size: int) -> int:
    """What a message of `size` bytes costs inside a repeated field: tag, length varint, body."""
    varint = 1
    while size >= 1 << (7 * varint):
        varint += 1
    return 1 + varint + size


def _chunks(items: Sequence[_Item], max_bytes: int) -> list[Sequence[_Item]]:
    """Split `items` so no ReportBatch request exceeds `max_bytes` (a bigger report alone)."""
    chunks: list[Sequence[_Item]] = []
    start, size = 0, 0
    for n, (_, request, _) in enumerate(items):
        # A TaskReport wraps the request in one more field: two levels of tag and length.
        weight = _entry_bytes(_entry_bytes(request.ByteSize()))
        if n > start and size + weight > max_bytes:
            chunks.append(items[start:n])
            start, size = n, 0
        size += weight
    chunks.append(items[start:])
    return chunks
