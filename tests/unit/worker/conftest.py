"""An in-memory stand-in for the generated gRPC stub, recording every call the worker makes."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
import orjson
import pytest

from wiggle._proto.wiggle.v1 import wiggle_pb2 as pb
from wiggle.compiler import load_flow
from wiggle.worker import Registry
from wiggle.worker._definitions import DefinitionCache
from wiggle.worker._local_run import RunEnv
from wiggle.worker._rpc import Rpc


class FakeRpcError(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str = "", *, server: bool = False) -> None:
        super().__init__(details)
        self._code = code
        self._details = details
        # A Wiggle server tags the errors it raises; a transport failure has no trailers.
        self._trailers = (("wiggle-error-code", "ERROR_CODE_UNSPECIFIED"),) if server else ()

    def trailing_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._trailers

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class FakeStub:
    """Answers like a well-behaved server; `answers[method]` overrides one method's answer."""

    definitions: dict[str, bytes] = field(default_factory=dict)
    calls: list[tuple[str, Any]] = field(default_factory=list)
    answers: dict[str, Callable[[Any], Any]] = field(default_factory=dict)

    def _record(self, method: str, request: Any, default: Callable[[Any], Any]) -> Any:
        self.calls.append((method, request))
        answer = self.answers.get(method, default)
        return answer(request)

    def requests(self, method: str) -> list[Any]:
        return [req for m, req in self.calls if m == method]

    def batches(self) -> list[tuple[list[str], bool, str]]:
        """Each AdvanceRun as (node ids, final, handback reason)."""
        return [
            ([s.node_id for s in r.steps], r.final, r.handback_reason)
            for r in self.requests("AdvanceRun")
        ]

    def AdvanceRun(self, request: pb.AdvanceRunRequest, **_: Any) -> pb.AdvanceRunResponse:
        return self._record(
            "AdvanceRun",
            request,
            lambda r: pb.AdvanceRunResponse(
                instance_status=pb.InstanceStatus.RUNNING,
                lease_expires_at_ms=_now_ms() + 60_000,
                keep_going=not r.final,
            ),
        )

    def CompleteTask(self, request: Any, **_: Any) -> pb.TaskReportResponse:
        return self._record(
            "CompleteTask",
            request,
            lambda r: pb.TaskReportResponse(instance_status=pb.InstanceStatus.RUNNING),
        )

    def FailTask(self, request: Any, **_: Any) -> pb.TaskReportResponse:
        return self._record(
            "FailTask",
            request,
            lambda r: pb.TaskReportResponse(instance_status=pb.InstanceStatus.RUNNING),
        )

    def ReleaseTask(self, request: Any, **_: Any) -> pb.TaskReportResponse:
        return self._record(
            "ReleaseTask",
            request,
            lambda r: pb.TaskReportResponse(instance_status=pb.InstanceStatus.RUNNING),
        )

    def EndPolls(self, request: Any, **_: Any) -> pb.EndPollsResponse:
        return self._record("EndPolls", request, lambda r: pb.EndPollsResponse(ended=0))

    def Heartbeat(self, request: Any, **_: Any) -> pb.HeartbeatResponse:
        return self._record(
            "Heartbeat",
            request,
            lambda r: pb.HeartbeatResponse(
                lease_expires_at_ms=_now_ms() + 60_000, instance_status=pb.InstanceStatus.RUNNING
            ),
        )

    def GetDefinition(self, request: Any, **_: Any) -> pb.Definition:
        def default(r: Any) -> pb.Definition:
            if r.version not in self.definitions:
                raise FakeRpcError(grpc.StatusCode.NOT_FOUND, "no such definition")
            return pb.Definition(name=r.name, version=r.version, graph=self.definitions[r.version])

        return self._record("GetDefinition", request, default)

    def PollTasks(self, request: Any, **_: Any) -> pb.PollTasksResponse:
        def default(r: Any) -> pb.PollTasksResponse:
            time.sleep(0.05)
            return pb.PollTasksResponse()

        return self._record("PollTasks", request, default)


@dataclass
class Harness:
    stub: FakeStub
    env: RunEnv
    flow: Any  # CompiledFlow

    def task(
        self,
        node_id: str | None = None,
        ctx: Any = None,
        *,
        mode: str = "",
        attempt: int = 1,
        loop_counts: dict[str, int] | None = None,
        timeout_ms: int = 60_000,
        max_payload_bytes: int = 0,
        max_request_bytes: int = 0,
    ) -> pb.Task:
        graph = self.flow.graph
        node_id = node_id or graph.start
        mode = mode or graph.execution.value
        return pb.Task(
            task_id="t-1",
            lease="lease-1",
            lease_expires_at_ms=_now_ms() + timeout_ms,
            instance_id="i-1",
            flow=graph.name,
            version=graph.version,
            node_id=node_id,
            activity=graph.nodes[node_id].activity,
            queue=graph.nodes[node_id].queue,
            attempt=attempt,
            input=orjson.dumps(ctx),
            execution_mode=pb.ExecutionMode.Value(mode),
            loop_counts=orjson.dumps(loop_counts or {}),
            timeout_ms=timeout_ms,
            max_payload_bytes=max_payload_bytes,
            max_request_bytes=max_request_bytes,
        )


@pytest.fixture
def harness() -> Callable[..., Harness]:
    def make(
        flow_yaml: str,
        registry: Registry,
        *,
        queues: tuple[str, ...] = ("default",),
        batch: int = 64,
        advance_supported: bool | None = True,
        publish: bool = True,
    ) -> Harness:
        flow = load_flow(flow_yaml.encode())
        stub = FakeStub()
        if publish:
            stub.definitions[flow.version] = flow.canonical
        rpc = Rpc(stub)
        env = RunEnv(
            rpc=rpc,
            registry=registry,
            queues=queues,
            definitions=DefinitionCache(rpc),
            local_batch_size=batch,
            advance_run_supported=advance_supported,
        )
        return Harness(stub, env, flow)

    return make


@pytest.fixture
def rpc_error() -> type[FakeRpcError]:
    return FakeRpcError
