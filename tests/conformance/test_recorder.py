"""The recorder, driven through its interceptor with a stand-in handler (no server)."""

from __future__ import annotations

import threading
from typing import Any

import grpc
import pytest

from wiggle._proto.wiggle.v1 import wiggle_pb2 as pb
from wiggle.conformance._recorder import Recorder, ServerFault


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


def _batch_handler(recorder: Recorder) -> Any:
    def serve(request: pb.ReportBatchRequest, context: Any) -> pb.ReportBatchResponse:
        status = pb.InstanceStatus.RUNNING
        return pb.ReportBatchResponse(
            answers=[
                pb.TaskReportAnswer(task=pb.TaskReportResponse(instance_status=status))
                for _ in request.reports
            ]
        )

    handler = recorder.intercept_service(
        lambda details: grpc.unary_unary_rpc_method_handler(serve),
        _Details("/wiggle.v1.Wiggle/ReportBatch"),
    )
    assert handler is not None and handler.unary_unary is not None
    return handler.unary_unary


class _Aborted(Exception):
    pass


class _AbortingContext(_Context):
    def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise _Aborted(code)


def test_a_lost_report_batch_is_applied_and_recorded_as_lost_for_every_report():
    recorder = Recorder()
    recorder.arm([ServerFault("ReportBatch", lose_response=True, times=1)])
    serve = _batch_handler(recorder)
    reports = [
        pb.TaskReport(complete=pb.CompleteTaskRequest(task_id="t", lease="L", seq=1)),
        pb.TaskReport(release=pb.ReleaseTaskRequest(task_id="u", lease="M", seq=1)),
    ]
    with pytest.raises(_Aborted):
        serve(pb.ReportBatchRequest(reports=reports), _AbortingContext())
    serve(pb.ReportBatchRequest(reports=reports[:1]), _AbortingContext())  # times: 1
    calls = recorder.calls({"L", "M"})
    assert [(c.rpc, c.injected, c.batched, c.ok) for c in calls] == [
        ("CompleteTask", "lost", True, True),
        ("ReleaseTask", "lost", True, True),
        ("CompleteTask", "", True, True),
    ]


def test_a_report_fault_turns_report_batch_off_but_a_batch_fault_does_not():
    recorder = Recorder()
    recorder.arm([ServerFault("CompleteTask", lose_response=True)])
    batch = pb.ReportBatchRequest(
        reports=[pb.TaskReport(complete=pb.CompleteTaskRequest(task_id="t", lease="L", seq=1))]
    )
    with pytest.raises(_Aborted) as off:
        _batch_handler(recorder)(batch, _AbortingContext())
    assert off.value.args == (grpc.StatusCode.UNIMPLEMENTED,)
    recorder.arm([ServerFault("ReportBatch", status="UNAVAILABLE")])
    with pytest.raises(_Aborted) as refused:
        _batch_handler(recorder)(batch, _AbortingContext())
    assert refused.value.args == (grpc.StatusCode.UNAVAILABLE,)
    [call] = recorder.calls({"L"})
    assert (call.injected, call.code, call.ok) == ("refused", "UNAVAILABLE", False)


def test_a_complete_task_result_is_measured_for_the_limits():
    recorder = Recorder()
    handler = recorder.intercept_service(
        lambda details: grpc.unary_unary_rpc_method_handler(
            lambda request, context: pb.TaskReportResponse()
        ),
        _Details("/wiggle.v1.Wiggle/CompleteTask"),
    )
    assert handler is not None and handler.unary_unary is not None
    deep = b"[" * 300 + b"1" + b"]" * 300
    handler.unary_unary(
        pb.CompleteTaskRequest(task_id="t", lease="L", seq=1, result=deep), _Context()
    )
    [call] = recorder.calls({"L"})
    [seen] = call.steps
    assert (seen.context_bytes, seen.too_deep) == (601, True)


def test_a_held_poll_answer_comes_once_the_worker_ends_its_polls():
    recorder = Recorder()
    recorder.arm([ServerFault("PollTasks", hold=True, times=1)])
    claimed = pb.PollTasksResponse(tasks=[pb.Task(task_id="t", lease="L")])
    poll = recorder.intercept_service(
        lambda details: grpc.unary_unary_rpc_method_handler(lambda request, context: claimed),
        _Details("/wiggle.v1.Wiggle/PollTasks"),
    )
    end = recorder.intercept_service(
        lambda details: grpc.unary_unary_rpc_method_handler(
            lambda request, context: pb.EndPollsResponse()
        ),
        _Details("/wiggle.v1.Wiggle/EndPolls"),
    )
    assert poll is not None and poll.unary_unary is not None
    assert end is not None and end.unary_unary is not None
    answered = threading.Event()

    def polling() -> None:
        poll.unary_unary(pb.PollTasksRequest(worker_id="w"), _Context())
        answered.set()

    thread = threading.Thread(target=polling)
    thread.start()
    assert not answered.wait(0.3)  # held: the worker has not ended its polls
    end.unary_unary(pb.EndPollsRequest(worker_id="other"), _Context())
    assert not answered.wait(0.3)  # another worker's EndPolls releases nothing
    end.unary_unary(pb.EndPollsRequest(worker_id="w"), _Context())
    assert answered.wait(10)
    thread.join(10)
    assert recorder.polls_held() == 1
    assert poll.unary_unary(pb.PollTasksRequest(worker_id="w"), _Context()) == claimed
    assert recorder.polls_held() == 1  # times: 1, the next answer went out as it was
