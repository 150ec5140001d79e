"""FlowTest: one instance on the real engine, an in-process worker and a virtual clock."""

from __future__ import annotations

from pathlib import Path

import pytest

from wiggle.compiler import load_flow
from wiggle.engine import InstanceStatus
from wiggle.testing import MODES, FlowTest
from wiggle.worker import NonRetryable, step

ROOT = Path(__file__).resolve().parents[3]
ONBOARDING = ROOT / "definitions" / "customer-onboarding.yaml"
ONBOARDING_HANDLERS = ROOT / "definitions" / "handlers" / "customer_onboarding.py"
APPLICANT = {"customer_id": "C-1", "email": "a@example.com", "country": "GB", "documents": ["p"]}

LONG_WAIT = load_flow(
    "wiggle: 1\nname: long\nsteps:\n"
    + "".join(f"  - task: s{i}\n" for i in range(3))
    + "  - await: go\n    timeout: 30d\n    on_timeout: [{task: late}]\n  - task: done\n"
)


def same(ctx):
    return ctx


@pytest.mark.parametrize("mode", MODES)
def test_a_thirty_day_deadline_passes_when_the_clock_is_moved(mode: str) -> None:
    handlers = {name: same for name in ("s0", "s1", "s2", "late", "done")}
    with FlowTest(LONG_WAIT, handlers=handlers, mode=mode) as run:
        run.start({"n": 1})
        assert run.waiting_at == ["go"]
        run.advance("29d")
        assert run.status is InstanceStatus.RUNNING and run.now_ms == 29 * 86_400_000
        run.advance("1d")
        assert run.status is InstanceStatus.COMPLETED
        run.assert_path(["s0", "s1", "s2", "go", "late", "done"])
        (fired,) = [e for e in run.view().events if e.kind == "timer_fired"]
        assert fired.at_ms - run.start_ms == 30 * 86_400_000  # at its own instant


def test_a_signal_moves_the_instance_on_at_once() -> None:
    with FlowTest(ONBOARDING, handlers=ONBOARDING_HANDLERS) as run:
        run.start(APPLICANT)
        run.signal("kyc_result", {"status": "approved", "reference": "R-1"})
        assert run.status is InstanceStatus.COMPLETED
        assert run.context["account"]["status"] == "active"
        assert run.calls["send_welcome_email"] == 1
        run.assert_visits("kyc_result", "kyc_approved", "activate_account")
        assert run.now_ms == 0  # nothing waited


def test_assert_path_shows_both_paths_when_they_differ() -> None:
    with FlowTest(ONBOARDING, handlers=ONBOARDING_HANDLERS) as run:
        run.start(APPLICANT)
        run.run_to_end()
        with pytest.raises(AssertionError) as caught:
            run.assert_path(["create_account", "request_kyc", "kyc_result", "activate_account"])
    text = str(caught.value)
    assert (
        "path differs at step 4: expected 'activate_account', took 'open_compliance_ticket'" in text
    )
    assert "expected path: [create_account, request_kyc, kyc_result, activate_account]" in text
    assert (
        "actual path:   [create_account, request_kyc, kyc_result, open_compliance_ticket, "
        "compliance_decision, expire_application, kyc_approved, close_account, "
        "send_refusal_email]"
    ) in text


def test_results_answer_calls_by_number_then_the_real_handler_takes_over() -> None:
    results = {
        "request_kyc": [{"fail": "busy"}, {"fail": "busy"}],
        "kyc_approved": True,
        "create_account": {"merge": {"account": {"id": "given", "status": "locked"}}},
    }
    with FlowTest(ONBOARDING, handlers=ONBOARDING_HANDLERS, results=results) as run:
        run.start(APPLICANT)
        assert run.calls["request_kyc"] == 1  # the retry waits for its backoff
        run.advance("1s")
        run.advance("2s")
        assert run.calls["request_kyc"] == 3 and run.waiting_at == ["kyc_result"]
        run.signal("kyc_result", {"status": "rejected"})
        assert run.context["account"] == {"id": "given", "status": "active"}  # kyc_approved: true


def test_a_handler_that_raises_is_the_steps_failure_not_a_crash() -> None:
    def broken(ctx):
        raise KeyError("qty")

    def refuse(ctx):
        raise NonRetryable("never")

    flow = load_flow(
        "wiggle: 1\nname: f\nsteps:\n  - task: a\n    retry: {max_attempts: 2, initial: 1s}\n"
    )
    with FlowTest(flow, handlers={"a": broken}) as run:
        run.start(None)
        run.run_to_end()
        assert run.status is InstanceStatus.FAILED
        assert run.reason == "step 'a' failed after 2 attempt(s): 'qty'"
        assert run.calls["a"] == 2
    with FlowTest(flow, handlers={"a": refuse}) as run:
        run.start(None)
        assert (run.status, run.reason) == (InstanceStatus.FAILED, "step 'a' failed: never")


@pytest.mark.parametrize("mode", MODES)
def test_handlers_see_their_step_and_async_handlers_run(mode: str) -> None:
    async def a(ctx):
        info = step()
        return {**ctx, "a": [info.node_id, info.attempt, info.execution_mode.value]}

    flow = load_flow("wiggle: 1\nname: f\nsteps:\n  - task: a\n  - filter: ok\n  - task: b\n")
    handlers = {"a": a, "ok": lambda ctx: True, "b": lambda ctx: {**ctx, "b": step().node_id}}
    with FlowTest(flow, handlers=handlers, mode=mode) as run:
        run.start({})
        assert run.context == {"a": ["a", 1, mode], "b": "b"}


def test_a_missing_result_fails_the_step_and_says_what_to_give() -> None:
    with FlowTest(ONBOARDING, results={"create_account": {"returns": {}}}) as run:
        run.start(APPLICANT)
        assert run.status is InstanceStatus.FAILED
        assert "no result for activity 'request_kyc' (call 1)" in run.reason


def test_expect_checks_named_expectations_and_lists_every_failure() -> None:
    with FlowTest(ONBOARDING, handlers=ONBOARDING_HANDLERS) as run:
        run.start(APPLICANT)
        run.expect(status="RUNNING", waiting_at=["kyc_result"], calls={"create_account": 1})
        with pytest.raises(AssertionError) as caught:
            run.expect(status=InstanceStatus.COMPLETED, context_at={"/kyc/status": "approved"})
        assert str(caught.value).splitlines() == [
            "status: expected COMPLETED, got RUNNING",
            'context at \'/kyc/status\': expected "approved", got "requested"',
        ]


def test_time_cannot_go_back_and_an_instance_starts_once() -> None:
    from wiggle.testing import ScenarioError

    with FlowTest(ONBOARDING, handlers=ONBOARDING_HANDLERS) as run:
        run.start(APPLICANT)
        run.advance("1h")
        with pytest.raises(ScenarioError, match="cannot go back"):
            run.advance_to(1000)
        with pytest.raises(ScenarioError, match="started its instance already"):
            run.start(APPLICANT)


def test_the_pytest_fixture_builds_flow_tests_and_closes_them(flow_test) -> None:
    run = flow_test(ONBOARDING, handlers=str(ONBOARDING_HANDLERS), mode="LOCAL_ASYNC")
    run.start(APPLICANT)
    run.advance("3d")
    run.assert_visits("kyc_result", "open_compliance_ticket")
    assert run.waiting_at == ["compliance_decision"]
