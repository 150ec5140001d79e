"""Payload and depth limits through real processes: refused at the edge with a clear error,
or, for a step's result, a step failure at once; a legal but large LOCAL_ASYNC run completes."""

from __future__ import annotations

import grpc
import pytest
from faultkit import MODES, deploy, read_ledger, read_stats, scale, start_many

from wiggle._limits import MAX_JSON_DEPTH
from wiggle._proto.wiggle.v1 import wiggle_pb2 as pb
from wiggle._proto.wiggle.v1 import wiggle_pb2_grpc as pb_grpc

pytestmark = pytest.mark.timeout(300)

MB = 1024 * 1024

BIG = """
wiggle: 1
name: big-{lower}
execution: {mode}
steps:
  - {{task: s0, timeout: 5s}}
  - {{task: big, timeout: 5s, retry: {{max_attempts: 3, initial: 50ms}}}}
  - {{task: s1, timeout: 5s}}
"""

DEEP = """
wiggle: 1
name: deep
steps:
  - {task: deep, timeout: 5s, retry: {max_attempts: 3, initial: 50ms}}
"""

LARGE = """
wiggle: 1
name: large
execution: LOCAL_ASYNC
steps:
{steps}
"""


def test_limits_at_the_edge(cluster, checker, ledger):
    _, address = cluster.server()
    big = deploy(address, *(BIG.format(mode=m, lower=m.lower()) for m in MODES))
    (deep,) = deploy(address, DEEP)
    large_steps = "\n".join(f"  - {{task: inc, id: inc{i}, timeout: 10s}}" for i in range(10))
    (large,) = deploy(address, LARGE.format(steps=large_steps))
    cluster.worker(address, concurrency=4)

    failing: list[str] = []
    for flow in big:  # a 5 MB result, over the 4 MB payload limit
        failing += start_many(address, flow, [{"big": 5 * MB}])
    failing += start_many(address, deep, [{"deep": MAX_JSON_DEPTH + 1}])
    ok = start_many(address, deep, [{"deep": MAX_JSON_DEPTH - 1}])
    # Ten 2 MB contexts in one LOCAL_ASYNC run: more than one request may carry.
    ok += start_many(address, large, [{"n": 0, "pad": "x" * (2 * MB)}] * scale(1, 3))

    # Refused at the edge, each with a clear error and nothing written.
    channel = grpc.insecure_channel(address)
    stub = pb_grpc.WiggleStub(channel)
    refusals = [
        (pb.StartInstanceRequest(flow="deep", input=b"[" * 1_000 + b"]" * 1_000), "levels deep"),
        (pb.StartInstanceRequest(flow="f" * 10_000), "at most 200 characters"),
        (pb.StartInstanceRequest(flow="deep", instance_id="i" * 65), "1 to 64 characters"),
        (
            pb.SignalInstanceRequest(instance_id=ok[0], name="go", payload=b"[" * 200 + b"]" * 200),
            "levels deep",
        ),
    ]
    codes = []
    for request, why in refusals:
        is_start = isinstance(request, pb.StartInstanceRequest)
        call = stub.StartInstance if is_start else stub.SignalInstance
        with pytest.raises(grpc.RpcError) as exc:
            call(request, timeout=30)
        codes.append(exc.value.code())
        assert why in exc.value.details() and len(exc.value.details()) < 1_000
    channel.close()

    ids = failing + ok
    finished = checker.wait_finished(ids, timeout=scale(120, 300))
    contexts = checker.contexts(ids)
    stats = read_stats(cluster.stats)
    tally = checker.tally(
        "payload and depth limits",
        ids,
        cluster.ledger,
        cluster.stats,
        fault=(
            f"{len(failing)} over-limit results failed at once, "
            f"{stats['refused:INVALID_REQUEST']} requests refused at the edge"
        ),
    )
    ledger(tally, failed_ok=len(failing))
    assert codes == [grpc.StatusCode.INVALID_ARGUMENT] * len(refusals)
    for instance in failing:
        assert finished[instance] == "FAILED"
        reason = contexts[instance][1]
        assert "max_payload_bytes" in reason or f"limit is {MAX_JSON_DEPTH}" in reason, reason
    for instance in ok:
        assert finished[instance] == "COMPLETED", contexts[instance][1]
    runs = [e for e in read_ledger(cluster.ledger) if e.node in ("big", "deep")]
    assert len(runs) == len({(e.instance, e.key) for e in runs})  # none ran twice
