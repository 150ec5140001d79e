"""The pure parts of the wire layer: address classification, error mapping both ways, JSON
decoding limits, config checks, progress lines. No sockets."""

from __future__ import annotations

import grpc
import pytest

from wiggle import errors
from wiggle.cli._output import EventPrinter
from wiggle.client import Event
from wiggle.client._errors import from_rpc_error
from wiggle.server._auth import is_loopback
from wiggle.server._convert import decode_json
from wiggle.server._errors import DETAIL_KEY, ERROR_CODE_KEY, _detail, status_for
from wiggle.server._server import ServerConfig, ServerConfigError
from wiggle.wire import ERROR_TABLE


@pytest.mark.parametrize(
    ("address", "loopback"),
    [
        ("127.0.0.1:7233", True),
        ("127.0.0.2:1", True),
        ("localhost:7233", True),
        ("[::1]:7233", True),
        ("0.0.0.0:7233", False),
        ("[::]:7233", False),
        ("10.1.2.3:7233", False),
        ("wiggle.example.com:443", False),
    ],
)
def test_is_loopback(address, loopback):
    assert is_loopback(address) is loopback


class FakeRpcError(grpc.RpcError):
    def __init__(self, code, details, trailing=()):
        self._code, self._details, self._trailing = code, details, trailing

    def code(self):
        return self._code

    def details(self):
        return self._details

    def trailing_metadata(self):
        return self._trailing


ROUND_TRIP = [
    errors.FlowError([errors.Diagnostic("f.yaml", 3, 5, "bad step", "/steps/0")]),
    errors.DefinitionNotFound("greet", "sha256:abc"),
    errors.DefinitionNotFound("greet"),
    errors.InstanceNotFound("i-1"),
    errors.BatchNotFound("no bulk action with id 'b-1'"),
    errors.ScheduleNotFound("nightly-batch"),
    errors.NotFound("no such worker"),
    errors.InputRejected("input rejected by flow 'greet': 'name' is a required property"),
    errors.WrongPath("step 'x' does not follow 'hello'"),
    errors.SignalNotAwaited("i-1", "Go", ["go", "stop"]),
    errors.InvalidRequest("the start input is not valid JSON"),
    errors.StaleLease("t-1", "superseded"),
    errors.ReportOutOfOrder("t-1", 5, 3),
    errors.InstanceNotRunning("i-1", "COMPLETED"),
    errors.Conflict("moved on"),
    errors.InstanceExists("instance 'i-1' exists with another input"),
    errors.RepairRefused("instance 'i-1' is COMPLETED: nothing to retry"),
    errors.PayloadTooLarge("too big"),
    errors.Unauthenticated("wrong bearer token"),
    errors.PermissionDenied("the credential 'w' may not poll queue 'other'"),
    errors.Unavailable("the database cannot be reached"),
]
FIELDS = ("diagnostics", "name", "version", "instance_id", "status", "task_id", "awaited")


def test_every_class_of_the_wire_table_makes_the_round_trip():
    assert {cls for cls, _, _ in ERROR_TABLE} == {type(e) for e in ROUND_TRIP}


@pytest.mark.parametrize("original", ROUND_TRIP, ids=lambda e: type(e).__name__)
def test_errors_survive_the_wire(original):
    code, reason = status_for(original)
    trailing = [(ERROR_CODE_KEY, reason)]
    detail = _detail(original)
    if detail:
        trailing.append((DETAIL_KEY, detail))
    back = from_rpc_error(FakeRpcError(code, str(original), tuple(trailing)), "here:1")
    assert type(back) is type(original)
    assert str(back) == str(original)
    for field in FIELDS:
        assert getattr(back, field, None) == getattr(original, field, None), field


def test_a_detail_of_the_wrong_type_is_not_taken():
    """A detail trailer is the other end's word: a field of the wrong type becomes empty."""
    trailing = (
        (ERROR_CODE_KEY, "SIGNAL_NOT_AWAITED"),
        (DETAIL_KEY, b'{"instance_id": 7, "name": "go", "awaited": ["a", 3]}'),
    )
    back = from_rpc_error(FakeRpcError(grpc.StatusCode.INVALID_ARGUMENT, "no", trailing), "h:1")
    assert type(back) is errors.SignalNotAwaited
    assert (back.instance_id, back.name, back.awaited) == ("", "go", ("a",))
    assert str(back) == "no"


def test_an_unreachable_server_is_named():
    back = from_rpc_error(FakeRpcError(grpc.StatusCode.UNAVAILABLE, "connection refused"), "h:1")
    assert type(back) is errors.Unavailable
    assert str(back) == "cannot reach the Wiggle server at h:1: connection refused"


@pytest.mark.parametrize(
    ("code", "cls"),
    [
        (grpc.StatusCode.NOT_FOUND, errors.NotFound),
        (grpc.StatusCode.INVALID_ARGUMENT, errors.InvalidRequest),
        (grpc.StatusCode.FAILED_PRECONDITION, errors.Conflict),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, errors.PayloadTooLarge),
        (grpc.StatusCode.UNAUTHENTICATED, errors.Unauthenticated),
        (grpc.StatusCode.UNAVAILABLE, errors.Unavailable),
        (grpc.StatusCode.INTERNAL, errors.WiggleError),
    ],
)
def test_status_codes_without_metadata(code, cls):
    back = from_rpc_error(FakeRpcError(code, "something"), "here:1")
    assert type(back) is cls


def test_status_codes_of_the_error_tree():
    assert status_for(errors.StaleLease("t")) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "STALE_LEASE",
    )
    assert status_for(errors.Unavailable("db down"))[0] is grpc.StatusCode.UNAVAILABLE
    assert status_for(errors.FlowError([]))[1] == "FLOW_INVALID"


def test_decode_json():
    assert decode_json(b"", "x", 10) is None
    assert decode_json(b'{"a":1}', "x", 10) == {"a": 1}
    with pytest.raises(errors.PayloadTooLarge):
        decode_json(b'"' + b"x" * 20 + b'"', "x", 10)
    with pytest.raises(errors.InvalidRequest, match="not valid JSON"):
        decode_json(b"{", "the input", 10)


def test_config_checks():
    ServerConfig(address="127.0.0.1:0").check()
    ServerConfig(address="0.0.0.0:0", token="t").check()
    with pytest.raises(ServerConfigError, match="token"):
        ServerConfig(address="0.0.0.0:0").check()
    with pytest.raises(ServerConfigError, match="both"):
        ServerConfig(tls_cert="c.pem").check()  # type: ignore[arg-type]


class Out:
    encoding = "utf-8"

    def __init__(self):
        self.lines = []

    def write(self, text):
        self.lines.append(text)

    def flush(self):
        pass


def test_progress_lines():
    out = Out()
    printer = EventPrinter(out)
    printer.print_new(
        [
            Event(1, 0, "instance_started", "", 0, None),
            Event(2, 0, "step_started", "validate", 1, None),
            Event(3, 0, "step_completed", "validate", 1, None),
            Event(4, 0, "step_failed", "charge", 2, {"message": "declined"}),
        ]
    )
    printer.print_new([Event(3, 0, "step_completed", "validate", 1, None)])  # seen: skipped
    text = "".join(out.lines)
    assert text.splitlines() == [
        "  · instance started",
        "  ✓ validate (attempt 1)",
        "  ✗ charge (attempt 2): declined",
    ]
