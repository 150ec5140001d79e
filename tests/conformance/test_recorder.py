"""The recorder, driven through its interceptor with a stand-in handler (no server)."""

from __future__ import annotations

import threading
from typing import Any

import grpc

from wiggle._proto.wiggle.v1 import wiggle_pb2 as pb
from wiggle.conformance._recorder import Recorder


class _Details(grpc.HandlerCallDetails):
    def __init__(self, method: str) -> None:
        self.method = method
        self.invocation_metadata = ()


class _Context:
    def trailing_metadata(self) -> tuple[()]:
        return ()

    def is_active(self) -> bool:
        return True


def test_the_judge_waits_for_a_report_the_server_applied_but_has_not_recorded_yet():
    # The server applies a report (the instance may be seen COMPLETED from then on) before the
    # recorder writes it down. A judge that read the record in between found the task "never
    # reported"; it waits for the calls still being served about the leases it judges.
    applied, release = threading.Event(), threading.Event()

    def complete(request: Any, context: Any) -> pb.TaskReportResponse:
        applied.set()
        release.wait(10)
        return pb.TaskReportResponse()

    recorder = Recorder()
    handler = recorder.intercept_service(
        lambda details: grpc.unary_unary_rpc_method_handler(complete),
        _Details("/wiggle.v1.Wiggle/CompleteTask"),
    )
    assert handler is not None and handler.unary_unary is not None
    request = pb.CompleteTaskRequest(task_id="t", lease="L", seq=1)
    serving = threading.Thread(target=handler.unary_unary, args=(request, _Context()))
    serving.start()
    try:
        assert applied.wait(10)
        assert recorder.calls({"L"}) == []
        assert not recorder.wait_recorded({"L"}, 0.05)
        assert recorder.wait_recorded({"other"}, 0.05)  # another lease is not held up
    finally:
        release.set()
    assert recorder.wait_recorded({"L"}, 10)
    assert [c.rpc for c in recorder.calls({"L"})] == ["CompleteTask"]
    serving.join(10)
