"""A local run's expression nodes, over the fake stub: evaluated by the worker after the step
before them, sent in the same batch, never counted in the batch size, and ending the run with
step_failed when one errs or gives a context over the payload limit."""

from __future__ import annotations

import orjson
import pytest

from wiggle.worker import Registry
from wiggle.worker._local_run import run_task

pytestmark = pytest.mark.timeout(30)

FLOW = """
wiggle: 1
name: expr
execution: {mode}
steps:
  - task: a
  - set:
      total: "ctx.n + 1"
      pad: "{pad}"
  - choice:
      - if: "ctx.total > 1"
        steps: [{{task: big}}]
    otherwise: [{{task: small}}]
"""


def registry(done: list[str]) -> Registry:
    reg = Registry()
    for name in ("a", "big", "small"):
        reg.register(lambda ctx, name=name: (done.append(name), ctx)[1], name)
    return reg


def flow(mode: str, pad: str = "''") -> str:
    return FLOW.format(mode=mode, pad=pad)


@pytest.mark.parametrize("mode", ["LOCAL_SYNC", "LOCAL_ASYNC"])
def test_expressions_travel_with_the_step_before_them(harness, mode):
    done: list[str] = []
    h = harness(flow(mode), registry(done), batch=1)
    run_task(h.env, h.task(ctx={"n": 5}))
    assert done == ["a", "big"]
    batches = h.stub.batches()
    # The batch size (1) counts worker steps: the set and the condition ride with `a`.
    assert batches[0] == (["a", "set-1", "if-1"], False, "")
    assert batches[-1][0][-1] == "big" and batches[-1][1]
    steps = h.stub.requests("AdvanceRun")[0].steps
    assert orjson.loads(steps[1].context) == {"n": 5, "total": 6, "pad": ""}
    assert steps[2].WhichOneof("outcome") == "predicate" and steps[2].predicate is True


def test_a_false_condition_takes_the_other_arm(harness):
    done: list[str] = []
    h = harness(flow("LOCAL_ASYNC"), registry(done))
    run_task(h.env, h.task(ctx={"n": 0}))
    assert done == ["a", "small"]
    ((nodes, final, _),) = h.stub.batches()
    assert nodes == ["a", "set-1", "if-1", "small"] and final
    assert h.stub.requests("AdvanceRun")[0].steps[2].predicate is False


@pytest.mark.parametrize("mode", ["LOCAL_SYNC", "LOCAL_ASYNC"])
def test_an_erring_expression_ends_the_run_non_retryably(harness, mode):
    done: list[str] = []
    h = harness(flow(mode), registry(done))
    run_task(h.env, h.task(ctx={"n": "five"}))  # string + int: no such overload
    assert done == ["a"]
    nodes, final, reason = h.stub.batches()[-1]
    assert nodes[-1] == "set-1" and final and reason == "step_failed"
    failure = h.stub.requests("AdvanceRun")[-1].steps[-1].failure
    assert failure.non_retryable and failure.error_type == "ExpressionError"
    assert "ctx.n + 1" in failure.message


@pytest.mark.parametrize("mode", ["LOCAL_SYNC", "LOCAL_ASYNC"])
def test_a_set_over_the_payload_limit_ends_the_run_there(harness, mode):
    # The set's new context is a result like a task's and is held to max_payload_bytes; a run
    # once buffered that failure and went on to the next step.
    done: list[str] = []
    h = harness(flow(mode, pad="ctx.blob + ctx.blob"), registry(done))
    # `a` passes on 3,000 bytes; the set doubles them past the 4,096-byte limit.
    run_task(h.env, h.task(ctx={"n": 5, "blob": "y" * 3000}, max_payload_bytes=4096))
    assert done == ["a"]
    nodes, final, reason = h.stub.batches()[-1]
    assert nodes[-1] == "set-1" and final and reason == "step_failed"
    failure = h.stub.requests("AdvanceRun")[-1].steps[-1].failure
    assert failure.non_retryable and "max_payload_bytes" in failure.message
