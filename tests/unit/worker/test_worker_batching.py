"""ReportBatcher: concurrent reports share ReportBatch calls; each caller sees what its own RPC
would have given it; a server without ReportBatch gets one RPC per report."""

from __future__ import annotations

import threading

import grpc
import pytest

from wiggle._proto.wiggle.v1 import wiggle_pb2 as pb
from wiggle.worker._batching import ReportBatcher


class _Unimplemented(grpc.RpcError):
    def code(self):
        return grpc.StatusCode.UNIMPLEMENTED


class FakeStub:
    """Answers each report by its task id: 'stale-*' refused as STALE_LEASE."""

    def __init__(self, *, batch: bool = True, hold: threading.Event | None = None) -> None:
        self.batches: list[int] = []
        self.singles: list[str] = []
        self.batch = batch
        self.hold = hold
        self.entered = threading.Event()

    def ReportBatch(self, request, timeout=None, metadata=None):
        if not self.batch:
            raise _Unimplemented()
        self.entered.set()
        if self.hold is not None:
            self.hold.wait(10)
        self.batches.append(len(request.reports))
        answers = []
        for item in request.reports:
            which = item.WhichOneof("report")
            task_id = getattr(item, which).task_id
            if task_id.startswith("stale"):
                answers.append(
                    pb.TaskReportAnswer(
                        error=pb.ReportError(
                            status_code=grpc.StatusCode.FAILED_PRECONDITION.value[0],
                            error_code="STALE_LEASE",
                            message=f"lease on {task_id} lost",
                        )
                    )
                )
            elif which == "advance":
                answers.append(pb.TaskReportAnswer(advance=pb.AdvanceRunResponse(keep_going=True)))
            else:
                answers.append(pb.TaskReportAnswer(task=pb.TaskReportResponse(instance_status=1)))
        return pb.ReportBatchResponse(answers=answers)

    def CompleteTask(self, request, timeout=None, metadata=None):
        self.singles.append(request.task_id)
        return pb.TaskReportResponse(instance_status=1)


def test_reports_made_while_a_batch_is_in_flight_go_together():
    hold = threading.Event()
    stub = FakeStub(hold=hold)
    batcher = ReportBatcher(stub)
    got: dict[str, object] = {}

    def report(task_id: str, method: str) -> None:
        request = (
            pb.AdvanceRunRequest(task_id=task_id, seq=1)
            if method == "AdvanceRun"
            else pb.CompleteTaskRequest(task_id=task_id, seq=1)
        )
        try:
            got[task_id] = batcher.call(method, request, 5.0)
        except grpc.RpcError as exc:
            got[task_id] = (exc.code(), exc.details(), dict(exc.trailing_metadata()))

    first = threading.Thread(target=report, args=("t0", "CompleteTask"))
    first.start()
    assert stub.entered.wait(5)  # the first report is alone in flight
    others = [
        threading.Thread(target=report, args=(f"t{i}", "AdvanceRun" if i % 2 else "CompleteTask"))
        for i in range(1, 6)
    ] + [threading.Thread(target=report, args=("stale-1", "CompleteTask"))]
    for t in others:
        t.start()
    while len(batcher._group._queue) < len(others):
        threading.Event().wait(0.001)
    hold.set()
    for t in [first, *others]:
        t.join(10)
    assert stub.batches == [1, 6]
    assert isinstance(got["t1"], pb.AdvanceRunResponse) and got["t1"].keep_going
    assert isinstance(got["t2"], pb.TaskReportResponse)
    assert got["stale-1"] == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "lease on stale-1 lost",
        {"wiggle-error-code": "STALE_LEASE"},
    )


def test_a_server_without_report_batch_gets_one_rpc_per_report():
    stub = FakeStub(batch=False)
    batcher = ReportBatcher(stub)
    assert batcher.call("CompleteTask", pb.CompleteTaskRequest(task_id="a"), 5.0).instance_status
    assert batcher.call("CompleteTask", pb.CompleteTaskRequest(task_id="b"), 5.0).instance_status
    assert stub.singles == ["a", "b"]
    assert not batcher.enabled


def test_a_failed_batch_call_fails_each_report_with_its_error():
    class Down(grpc.RpcError):
        def code(self):
            return grpc.StatusCode.UNAVAILABLE

    class DownStub(FakeStub):
        def ReportBatch(self, request, timeout=None, metadata=None):
            raise Down()

    batcher = ReportBatcher(DownStub())
    with pytest.raises(grpc.RpcError) as exc:
        batcher.call("CompleteTask", pb.CompleteTaskRequest(task_id="a"), 5.0)
    assert exc.value.code() is grpc.StatusCode.UNAVAILABLE


def test_a_batch_stays_under_the_servers_request_limit():
    stub = FakeStub()
    sizes: list[int] = []
    original = stub.ReportBatch

    def measuring(request, timeout=None, metadata=None):
        sizes.append(request.ByteSize())
        return original(request, timeout=timeout, metadata=metadata)

    stub.ReportBatch = measuring
    batcher = ReportBatcher(stub)
    batcher.note_limit(10_000)
    items = [
        (
            "AdvanceRun",
            pb.AdvanceRunRequest(task_id=f"t{i}", seq=1, handback_reason="x" * 3_000),
            5.0,
        )
        for i in range(7)
    ]
    answers = batcher._send(items)
    assert len(answers) == 7 and all(isinstance(a, pb.AdvanceRunResponse) for a in answers)
    assert len(sizes) > 1 and max(sizes) <= 10_000


def test_a_batch_refused_as_too_large_sends_each_report_alone():
    class TooBig(grpc.RpcError):
        def code(self):
            return grpc.StatusCode.RESOURCE_EXHAUSTED

    class LimitStub(FakeStub):
        def ReportBatch(self, request, timeout=None, metadata=None):
            if len(request.reports) > 1 or request.reports[0].complete.task_id == "huge":
                raise TooBig()
            return super().ReportBatch(request, timeout=timeout, metadata=metadata)

    batcher = ReportBatcher(LimitStub())
    items = [
        ("CompleteTask", pb.CompleteTaskRequest(task_id=name, seq=1), 5.0)
        for name in ("a", "huge", "b")
    ]
    answers = batcher._send(items)
    assert isinstance(answers[0], pb.TaskReportResponse)
    assert isinstance(answers[1], grpc.RpcError)
    assert answers[1].code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert isinstance(answers[2], pb.TaskReportResponse)
