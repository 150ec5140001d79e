"""The wire table both ends share: every reason is the proto's, every error class the server
answers with comes back as itself, and every reason the proto defines has a row."""

from __future__ import annotations

import grpc

from wiggle import errors
from wiggle._proto.wiggle.v1 import wiggle_pb2 as pb
from wiggle.wire import ERROR_TABLE, Backoff, error_class_for, status_for, token_metadata

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
