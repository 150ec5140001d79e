"""The wire table both ends share: every reason is the proto's, every error class the server
answers with comes back as itself, and every reason the proto defines has a row. The one retry
loop of the client and the worker, and the one-line description of a failed call."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import grpc
import pytest

from wiggle import errors
from wiggle._proto.wiggle.v1 import wiggle_pb2 as pb
from wiggle.wire import (
    ERROR_TABLE,
    Backoff,
    Retry,
    code_of,
    describe,
    error_class_for,
    retrying,
    status_for,
    token_metadata,
)

PROTO_REASONS = set(pb.ErrorCode.keys())


def test_every_reason_in_the_table_is_a_proto_error_code():
    assert {reason for _, _, reason in ERROR_TABLE} <= PROTO_REASONS


def test_every_proto_error_code_has_a_row():
    assert {reason for _, _, reason in ERROR_TABLE} == PROTO_REASONS


def test_a_specific_reason_comes_back_as_the_class_it_was_sent_for():
    for cls, code, reason in ERROR_TABLE:
        if reason == "ERROR_CODE_UNSPECIFIED":
            continue
        assert error_class_for(reason, code) is cls, reason


def test_without_a_reason_the_status_code_decides():
    assert error_class_for("", grpc.StatusCode.NOT_FOUND) is errors.NotFound
    assert error_class_for("", grpc.StatusCode.DEADLINE_EXCEEDED) is errors.Unavailable
    assert error_class_for("", grpc.StatusCode.INTERNAL) is None


def test_the_most_specific_row_wins():
    assert status_for(errors.StaleLease("t")) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "STALE_LEASE",
    )
    assert status_for(errors.Conflict("moved on")) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "ERROR_CODE_UNSPECIFIED",
    )


def test_backoff_doubles_to_its_cap_within_the_jitter():
    backoff = Backoff(initial=0.1, cap=0.4)
    delays = [backoff.next_delay() for _ in range(5)]
    for delay, base in zip(delays, [0.1, 0.2, 0.4, 0.4, 0.4], strict=True):
        assert base * 0.8 <= delay <= base * 1.2
    backoff.reset()
    assert backoff.next_delay() <= 0.12


def test_a_token_travels_as_a_bearer_header_and_no_token_as_nothing():
    assert token_metadata("s3cret") == (("authorization", "Bearer s3cret"),)
    assert token_metadata(None) == ()


class _Refused(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode) -> None:
        self._code = code

    def code(self) -> grpc.StatusCode:
        return self._code


def _failing(times: int, code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE):
    calls = []

    def call() -> str:
        calls.append(1)
        if len(calls) <= times:
            raise _Refused(code)
        return "answer"

    return call, calls


def _unavailable(exc: grpc.RpcError) -> bool:
    return code_of(exc) is grpc.StatusCode.UNAVAILABLE


def test_retrying_tries_again_while_the_error_is_one_to_retry():
    call, calls = _failing(2)
    retry = Retry(10.0, backoff=Backoff(initial=0.001, cap=0.001))
    assert retrying(call, retry, _unavailable) == "answer"
    assert len(calls) == 3


def test_retrying_raises_an_error_not_to_retry_at_once():
    call, calls = _failing(1, grpc.StatusCode.NOT_FOUND)
    with pytest.raises(_Refused):
        retrying(call, Retry(10.0), _unavailable)
    assert len(calls) == 1


def test_a_spent_budget_raises_the_last_error():
    call, calls = _failing(100)
    with pytest.raises(_Refused):
        retrying(call, Retry(0.0), _unavailable)
    assert len(calls) == 1  # no pause fits in no time


def test_a_stopped_caller_does_not_try_again():
    stopped = threading.Event()
    stopped.set()
    call, calls = _failing(100)
    with pytest.raises(_Refused):
        retrying(call, Retry(10.0, stopped=stopped), _unavailable)
    assert len(calls) == 1


def test_describe_is_one_line():
    class Dump(_Refused):
        def details(self) -> str:
            return "Connection reset\n  by peer"

        def __str__(self) -> str:
            return "<_MultiThreadedRendezvous of RPC that terminated with:\n\tstatus = ...>"

    assert describe(Dump(grpc.StatusCode.UNAVAILABLE)) == "UNAVAILABLE: Connection reset by peer"


def test_every_channel_is_opened_through_the_wire_module():
    """One place for channel options (message sizes, reconnect backoff, TLS name override)."""
    root = Path(__file__).resolve().parents[2] / "wiggle"
    opened_elsewhere = [
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if "_proto" not in path.parts
        and path.name != "wire.py"
        and re.search(r"grpc\.(insecure|secure)_channel\(", path.read_text())
    ]
    assert opened_elsewhere == []
