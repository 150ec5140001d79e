"""Every shipped definition through the engine, in all three modes, on SQLite and PostgreSQL.

Each scenario (a sample input, a variation of it, scripted signals) runs under SERVER,
LOCAL_SYNC and LOCAL_ASYNC with the definition's own handlers, through the real server and the
Python worker (wiggle.conformance.check_flows). The modes must agree exactly: same status, same
final context, the same steps run the same number of times. The assertions below then check the
business outcome once (in SERVER mode: the others are equal to it).

The definitions wait hours and days (an await's deadline, a retry's backoff, a sleep until the
loader's next minute); the flows run here are the definitions with every timer shortened
(`shortened`): the graph is otherwise the same, so the test exercises the shipped structure and
handlers, not their waiting.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from wiggle.compiler import CompiledFlow, canonical_json, graph_from_canonical, load_flow_file
from wiggle.conformance import FlowCheck, FlowPlan, FlowSignal, check_flows
from wiggle.conformance._cases import Moment
from wiggle.worker import load_handlers

ROOT = Path(__file__).resolve().parents[3]
DEFINITIONS = ROOT / "definitions"

#: A deadline nobody meets (the escalation paths) and the loop's patience per approver: long
#: enough that a signal sent as its moment comes is in before it, short enough for 8 rounds.
AWAIT_MS = 300
SLEEP_MS = 20


def shortened(stem: str, *, people_wait: bool = False) -> CompiledFlow:
    """The definition with its sleeps, await deadlines and retry backoffs cut to milliseconds.
    `people_wait`: its human steps keep their deadlines (days), so that the runner's answers,
    sent once it sees a task open, are in before them."""
    doc = json.loads(load_flow_file(DEFINITIONS / f"{stem}.yaml").canonical)
    for node in doc["nodes"].values():
        if node["kind"] == "sleep" and node["duration_ms"] is not None:
            node["duration_ms"] = SLEEP_MS
        human = node.get("human") if node["kind"] == "await" else None
        if node["kind"] == "await" and node["timeout_ms"] is not None:
            if human is not None and people_wait:
                continue
            node["timeout_ms"] = AWAIT_MS
            if human is not None:  # due and reminders within the new deadline
                human["due_ms"], human["remind_ms"] = None, []
        for holder in (node, node.get("apply") or {}):
            retry = holder.get("retry")
            if retry:
                retry["initial_ms"], retry["max_ms"] = 10, 40
    return graph_from_canonical(canonical_json(doc))


def sample(stem: str, **changes: Any) -> Any:
    return {**json.loads((DEFINITIONS / "samples" / f"{stem}.json").read_text()), **changes}


_registries: dict[str, Any] = {}


def plan(
    label: str,
    stem: str,
    value: Any,
    *,
    handlers: str,
    signals: tuple[FlowSignal, ...] = (),
    children: tuple[str, ...] = (),
    people_wait: bool = False,
) -> FlowPlan:
    if handlers not in _registries:
        _registries[handlers] = load_handlers(DEFINITIONS / "handlers" / f"{handlers}.py")
    flows = [shortened(c) for c in children] + [shortened(stem, people_wait=people_wait)]
    return FlowPlan(flows, _registries[handlers], value, signals, label=label)


def at_start(name: str, payload: Any) -> FlowSignal:
    return FlowSignal(name, payload)


def when(moment: str, name: str, payload: Any) -> FlowSignal:
    return FlowSignal(name, payload, Moment.parse(moment))


Check = Callable[[Any, Any], None]  # (outcome in SERVER mode, its steps)
SCENARIOS: list[tuple[FlowPlan, str, str | None, Check]] = []


def scenario(p: FlowPlan, status: str, reason: str | None = None) -> Callable[[Check], Check]:
    def register(check: Check) -> Check:
        SCENARIOS.append((p, status, reason, check))
        return check

    return register


# -- order-fulfilment ------------------------------------------------------------------------

OF = "order-fulfilment"


@scenario(plan("order: the sample", OF, sample(OF), handlers="order_fulfilment"), "COMPLETED")
def _order(ctx: Any, steps: dict[str, int]) -> None:
    assert ctx["payment"] == {"ref": "pay-A-1001", "captured_cents": 9998}
    assert ctx["shipping"]["tracking"] == "TRK-A-1001"
    assert ctx["notified"]["to"] == "ada@example.com"
    assert steps["notify"] == 1


@scenario(
    plan(
        "order: out of stock",
        OF,
        sample(OF, items=[{"sku": "MON-27", "qty": 9, "price_cents": 19900}]),
        handlers="order_fulfilment",
    ),
    "COMPLETED",
    "filtered",
)
def _order_filtered(ctx: Any, steps: dict[str, int]) -> None:
    assert steps == {"validate": 1, "in_stock": 1}


@scenario(
    plan(
        "order: declined card", OF, sample(OF, card="4000000000000002"), handlers="order_fulfilment"
    ),
    "FAILED",
    "declined",
)
def _order_declined(ctx: Any, steps: dict[str, int]) -> None:
    assert steps["authorise"] == 1  # non-retryable: no second attempt


# -- customer-onboarding ---------------------------------------------------------------------

CO = "customer-onboarding"
KYC_OK = {"status": "approved", "reference": "KYC-5521"}


@scenario(
    plan("onboarding: approved", CO, sample(CO), handlers="customer_onboarding",
         signals=(at_start("kyc_result", KYC_OK),)),
    "COMPLETED",
)  # fmt: skip
def _onboarding(ctx: Any, steps: dict[str, int]) -> None:
    assert ctx["account"]["status"] == "active"
    assert ctx["emailed"]["template"] == "welcome"


@scenario(
    plan("onboarding: nobody answers", CO, sample(CO), handlers="customer_onboarding"), "COMPLETED"
)
def _onboarding_expires(ctx: Any, steps: dict[str, int]) -> None:
    assert steps["open_compliance_ticket"] == 1 and steps["expire_application"] == 1
    assert ctx["account"]["status"] == "closed"
    assert ctx["emailed"]["template"] == "refusal_expired"


@scenario(
    plan("onboarding: compliance approves", CO, sample(CO), handlers="customer_onboarding",
         signals=(at_start("compliance_decision", {"approve": True, "officer": "sam"}),)),
    "COMPLETED",
)  # fmt: skip
def _onboarding_compliance(ctx: Any, steps: dict[str, int]) -> None:
    assert ctx["kyc"]["status"] == "approved"
    assert ctx["account"]["status"] == "active"


# -- invoice-approval ------------------------------------------------------------------------
# Its human steps are answered through their tasks (`task:<step>`: the runner answers a task
# once it is open, each answer as another person).

IA = "invoice-approval"
APPROVE = {"approved": True}


@scenario(
    plan("invoice: the lead and finance approve", IA, sample(IA), handlers="invoice_approval",
         people_wait=True,
         signals=(at_start("task:lead_approval", APPROVE),
                  at_start("task:finance_approval", APPROVE),
                  at_start("task:finance_approval", {"approved": True, "comment": "ok"}))),
    "COMPLETED",
)  # fmt: skip
def _invoice(ctx: Any, steps: dict[str, int]) -> None:
    assert ctx["status"] == "approved"
    assert ctx["payment"]["scheduled"] is True
    assert ctx["lead"] == APPROVE
    assert ctx["finance"] == [
        {"by": "wiggle-conformance-2", "approved": True},
        {"by": "wiggle-conformance-3", "approved": True, "comment": "ok"},
    ]


@scenario(
    plan("invoice: small", IA, sample(IA, amount_cents=4200), handlers="invoice_approval"),
    "COMPLETED",
)
def _invoice_small(ctx: Any, steps: dict[str, int]) -> None:
    assert ctx["approved_by"] == ["auto"]
    assert "lead_approval" not in ctx


@scenario(
    plan("invoice: the lead rejects", IA, sample(IA), handlers="invoice_approval",
         people_wait=True,
         signals=(at_start("task:lead_approval", {"approved": False, "comment": "no PO"}),)),
    "COMPLETED",
)  # fmt: skip
def _invoice_rejected(ctx: Any, steps: dict[str, int]) -> None:
    assert ctx["status"] == "rejected"
    assert ctx["why"] == "not approved by the department: no PO"
    assert steps["return_to_submitter"] == 1 and steps["archive_invoice"] == 1
    assert "schedule_payment" not in steps


@scenario(
    plan("invoice: nobody answers", IA, sample(IA), handlers="invoice_approval"),
    "COMPLETED",
)
def _invoice_nobody_answers(ctx: Any, steps: dict[str, int]) -> None:
    assert ctx["why"] == "nobody in the department answered in time"
    assert steps["return_to_submitter"] == 1
    assert "schedule_payment" not in steps


# -- document-pipeline, nightly-batch --------------------------------------------------------

DP = "document-pipeline"


@scenario(plan("documents: the sample", DP, sample(DP), handlers="document_pipeline"), "COMPLETED")
def _documents(ctx: Any, steps: dict[str, int]) -> None:
    assert [p["number"] for p in ctx["pages"]] == [1, 2, 4]
    assert ctx["kept_pages"] == 3
    assert ctx["published"] is True


NB = "nightly-batch"


@scenario(
    plan("nightly: the sample", NB, sample(NB), handlers="nightly_batch",
         children=("nightly-batch-item",)),
    "COMPLETED",
)  # fmt: skip
def _nightly(ctx: Any, steps: dict[str, int]) -> None:
    assert [r["account"] for r in ctx["settled"]] == ["ACC-1", "ACC-3"]
    assert ctx["skipped"] == ["ACC-2"]
    assert ctx["reconciled"] is True
    assert steps["nightly-batch-item/load_account"] == 3


# -- payment-saga ----------------------------------------------------------------------------

PS = "payment-saga"


@scenario(plan("saga: paid", PS, sample(PS), handlers="payment_saga"), "COMPLETED")
def _saga(ctx: Any, steps: dict[str, int]) -> None:
    assert ctx["outcome"] == "paid" and ctx["charge"]["status"] == "succeeded"


@scenario(
    plan("saga: declined", PS, sample(PS, card_token="tok_declined"), handlers="payment_saga"),
    "COMPLETED",
)
def _saga_declined(ctx: Any, steps: dict[str, int]) -> None:
    assert ctx["outcome"] == "declined" and ctx["charge"]["status"] == "declined"
    assert steps["release_inventory"] == 1 and steps["cancel_payment_intent"] == 1


@scenario(
    plan("saga: a flaky card", PS, sample(PS, card_token="tok_flaky"), handlers="payment_saga"),
    "COMPLETED",
)
def _saga_flaky(ctx: Any, steps: dict[str, int]) -> None:
    assert ctx["outcome"] == "paid"
    assert steps["charge_card"] == 3  # two failed attempts, then success


@scenario(
    plan("saga: refunded", PS, sample(PS, address="PO Box 12"), handlers="payment_saga"),
    "COMPLETED",
)
def _saga_refund(ctx: Any, steps: dict[str, int]) -> None:
    assert ctx["outcome"] == "cancelled" and ctx["charge"]["status"] == "refunded"


@scenario(
    plan(
        "saga: malformed token", PS, sample(PS, card_token="tok_malformed"), handlers="payment_saga"
    ),
    "FAILED",
    "malformed",
)
def _saga_malformed(ctx: Any, steps: dict[str, int]) -> None:
    assert "charge_card" in steps


def test_every_definition_has_a_scenario() -> None:
    shipped = {p.stem for p in DEFINITIONS.glob("*.yaml")}
    covered = {flow.name for p, *_ in SCENARIOS for flow in p.flows}
    assert shipped <= covered


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def checks(request: pytest.FixtureRequest) -> dict[str, FlowCheck]:
    database = request.param
    if database == "postgres":
        mp = pytest.MonkeyPatch()
        request.addfinalizer(mp.undo)
        # The checker makes a fresh database per mode next to the session's server.
        mp.setenv("WIGGLE_TEST_POSTGRES_URL", request.getfixturevalue("postgres_url"))
    results = check_flows([p for p, *_ in SCENARIOS], databases=[database], deadline_s=60)
    return {c.label: c for c in results}


@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    ("label", "status", "reason", "check"),
    [pytest.param(p.label, s, r, c, id=p.label) for p, s, r, c in SCENARIOS],
)
def test_the_modes_agree(
    checks: dict[str, FlowCheck], label: str, status: str, reason: str | None, check: Check
) -> None:
    result = checks[label]
    assert result.agree, "\n".join(
        [f"{o.mode}: {o.status} {o.problem}" for o in result.outcomes] + result.differences
    )
    server = result.outcomes[0]
    assert server.status == status, server.reason
    if reason is not None:
        assert reason in server.reason
    check(server.context, server.steps)
