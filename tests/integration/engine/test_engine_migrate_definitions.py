"""Every shipped definition and its version 2 (definitions/v2/): instances started on version 1
in each mode, stopped at a point, migrated, finished. Each ends as this test says (the steps it
ran after the migration, and its context), which is also how an instance started on version 2
ends when given the same input and signals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from engine_testkit import MODES, Driver, drain_batch, events_of

from wiggle.engine import InstanceStatus, TokenState
from wiggle.worker import load_handlers

ROOT = Path(__file__).resolve().parents[3]
DEFINITIONS = ROOT / "definitions"


def source(stem: str, version: int) -> str:
    """The shipped flow, with nightly-batch's one-minute wait for the loader cut to 100 ms (in
    both versions alike: the graphs keep their shape)."""
    folder = DEFINITIONS if version == 1 else DEFINITIONS / "v2"
    text = (folder / f"{stem}.yaml").read_text()
    return text.replace("  - sleep: 1m\n", "  - sleep: 100ms\n")


def sample(stem: str, **changes: Any) -> Any:
    return {**json.loads((DEFINITIONS / "samples" / f"{stem}.json").read_text()), **changes}


_HANDLERS: dict[str, dict[str, Any]] = {}


def handlers(module: str) -> dict[str, Any]:
    if module not in _HANDLERS:
        registry = load_handlers(DEFINITIONS / "handlers" / f"{module}.py")
        _HANDLERS[module] = {n: registry.get(n).fn for n in registry.names()}  # type: ignore[union-attr]
    return _HANDLERS[module]


def migrate(
    d: Driver, flow: str, *, mapping: dict[str, str] | None = None, children: bool = False
) -> dict[str, Any]:
    plan = d.engine.plan_migration(flow, "latest", mapping=mapping, children=children)
    if plan["summary"]["migrate"]:
        done = drain_batch(d.engine, d.engine.apply_migration(plan, rate_per_s=1000).batch_id)
        assert done.done == plan["summary"]["migrate"], done
    return plan


def ran_after(d: Driver, mark: int) -> list[str]:
    return d.ran[mark:]


def awaiting(view: Any) -> bool:
    return any(t.state is TokenState.AWAITING for t in view.tokens)


def deploy_both(d: Driver, stem: str, *extra: str) -> tuple[Any, Any]:
    for other in extra:
        d.deploy(source(other, 1))
    return d.deploy(source(stem, 1)), None


# -- customer-onboarding: waiting at the KYC await ----------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_customer_onboarding_waiting_for_kyc(make_driver, mode):
    d = make_driver(handlers("customer_onboarding"), mode=mode, queues=("onboarding", "email"))
    d.deploy(source("customer-onboarding", 1))
    iid = d.engine.start("customer-onboarding", sample("customer-onboarding")).instance_id
    d.run(iid, until=awaiting)
    v2 = d.deploy(source("customer-onboarding", 2))
    plan = migrate(d, "customer-onboarding")
    assert plan["summary"] == {**plan["summary"], "migrate": 1, "blocked": 0}
    mark = len(d.ran)
    d.engine.signal(iid, "kyc_result", {"status": "approved", "reference": "KYC-5521"})
    done = d.run(iid)
    assert done.status is InstanceStatus.COMPLETED and done.version == v2.version
    assert ran_after(d, mark) == [
        "record_kyc",
        "screen_sanctions",
        "kyc_approved",
        "activate_account",
        "send_welcome_email",
    ]
    assert done.context["sanctions"] == {"status": "clear", "lists": ["UN", "EU", "OFAC"]}
    assert done.context["account"]["status"] == "active"
    # The same as an application started on version 2 and answered alike.
    native = d.engine.start("customer-onboarding", sample("customer-onboarding")).instance_id
    d.run(native, until=awaiting)
    d.engine.signal(native, "kyc_result", {"status": "approved", "reference": "KYC-5521"})
    assert _same(d.run(native).context, done.context)


def _same(a: Any, b: Any) -> bool:
    """Equal but for what names the instance itself (ids and keys derived from it)."""
    drop = ("account",)
    return {k: v for k, v in a.items() if k not in drop} == {
        k: v for k, v in b.items() if k not in drop
    }


# -- invoice-approval: waiting for the lead's approval, the payment step renamed ------------------

#: Who answers each human task of the sample invoice, in turn: the lead, then two of finance.
APPROVERS = (("ana", ("engineering-leads",)), ("ben", ("finance",)), ("carla", ("finance",)))


@pytest.mark.parametrize("mode", MODES)
def test_invoice_waiting_for_approval_with_the_payment_step_renamed(make_driver, mode):
    d = make_driver(handlers("invoice_approval"), mode=mode, queues=("finance",))
    d.deploy(source("invoice-approval", 1))
    iid = d.engine.start("invoice-approval", sample("invoice-approval")).instance_id
    view = d.run(iid, until=awaiting)
    assert [t.node_id for t in view.tokens if t.state is TokenState.AWAITING] == ["lead_approval"]
    v2 = d.deploy(source("invoice-approval", 2))
    blocked_free = migrate(d, "invoice-approval", mapping={"schedule_payment": "queue_payment"})
    assert blocked_free["summary"]["migrate"] == 1
    mark = len(d.ran)
    people = iter(APPROVERS)
    while d.engine.describe(iid).status is InstanceStatus.RUNNING:
        view = d.run(iid, until=lambda v: awaiting(v) or v.status is not InstanceStatus.RUNNING)
        if awaiting(view):
            person, groups = next(people)
            (task,) = d.engine.list_tasks(person, groups, instance_id=iid)
            d.engine.complete_task(task.task_id, person, groups, {"approved": True})
    assert next(people, None) is None  # the lead and two of finance were asked
    done = d.engine.describe(iid)
    assert done.status is InstanceStatus.COMPLETED and done.version == v2.version
    after = ran_after(d, mark)
    assert after[-3:] == ["schedule_payment", "notify_submitter", "archive_invoice"]
    assert done.context["notified"] == {"to": "lin@example.com", "outcome": "paid"}
    assert done.context["payment"]["scheduled"] is True
    assert done.context["finance"] == [
        {"by": "ben", "approved": True},
        {"by": "carla", "approved": True},
    ]


# -- order-fulfilment: before its first step, and at the combine step ----------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("point", ["before the first step", "at the combine step"])
def test_order_fulfilment(make_driver, mode, point):
    d = make_driver(handlers("order_fulfilment"), mode=mode, queues=("orders",))
    d.deploy(source("order-fulfilment", 1))
    iid = d.engine.start("order-fulfilment", sample("order-fulfilment")).instance_id
    if point == "at the combine step":
        d.run(
            iid,
            until=lambda v: any(
                t.node_id == "parallel-1.join" and t.state is TokenState.READY for t in v.tokens
            ),
        )
    v2 = d.deploy(source("order-fulfilment", 2))
    plan = migrate(d, "order-fulfilment")
    assert plan["summary"]["migrate"] == 1
    mark = len(d.ran)
    done = d.run(iid)
    assert done.status is InstanceStatus.COMPLETED and done.version == v2.version
    after = ran_after(d, mark)
    assert after[-3:] == ["merge", "award_loyalty_points", "notify"]
    if point == "before the first step":
        assert after[:2] == ["validate", "in_stock"]
        assert sorted(after[2:6]) == ["authorise", "capture", "print_label", "reserve_stock"]
    else:
        assert after == ["merge", "award_loyalty_points", "notify"]
    assert done.context["loyalty_points"] == 99  # 2 x 49.99
    assert done.context["notified"]["to"] == "ada@example.com"


# -- payment-saga: held at another queue; an order in the removed branch -------------------------


@pytest.mark.parametrize("mode", MODES)
def test_payment_saga_moves_where_its_next_step_waits_for_a_worker(make_driver, mode):
    d = make_driver(handlers("payment_saga"), mode=mode, queues=("payments",))
    d.deploy(source("payment-saga", 1))
    iid = d.engine.start("payment-saga", sample("payment-saga")).instance_id
    d.run(iid, until=lambda v: any(t.node_id == "hold_inventory" for t in v.tokens))
    v2 = d.deploy(source("payment-saga", 2))
    assert migrate(d, "payment-saga")["summary"]["migrate"] == 1
    d.queues = ("payments", "inventory", "psp", "notifications")
    mark = len(d.ran)
    done = d.run(iid)
    assert done.status is InstanceStatus.COMPLETED and done.version == v2.version
    assert ran_after(d, mark) == [
        "hold_inventory",
        "charge_card",
        "charge_declined",
        "confirm_inventory",
        "book_shipment",
        "send_receipt",
    ]


@pytest.mark.parametrize("mode", MODES)
def test_payment_saga_in_the_removed_branch_is_blocked_and_finishes_on_version_1(make_driver, mode):
    d = make_driver(
        handlers("payment_saga"), mode=mode, queues=("payments", "inventory", "notifications")
    )
    v1 = d.deploy(source("payment-saga", 1))
    refused = sample("payment-saga", address="PO Box 7")
    iid = d.engine.start("payment-saga", refused).instance_id

    # The card processor's queue (psp) is served only for the charge: the refund waits for it.
    def at(node: str) -> Any:
        return lambda v: any(t.node_id == node and t.state is TokenState.READY for t in v.tokens)

    d.run(iid, until=at("charge_card"))
    d.queues = ("psp",)
    d.run(iid, until=at("charge_declined"))
    d.queues = ("payments", "inventory", "notifications")
    d.run(iid, until=at("refund_charge"))
    d.deploy(source("payment-saga", 2))
    plan = migrate(d, "payment-saga")
    (entry,) = plan["instances"]
    assert entry["outcome"] == "blocked"
    assert [b["rule"] for b in entry["blockers"]] == ["removed-node"]
    d.queues = ("payments", "inventory", "psp", "notifications")
    done = d.run(iid)
    assert done.status is InstanceStatus.COMPLETED and done.version == v1.version
    assert d.ran[-3:] == ["refund_charge", "release_inventory", "notify_order_cancelled"]


# -- nightly-batch: asleep until the off-peak window, with children on the new item flow ---------


@pytest.mark.parametrize("mode", MODES)
def test_nightly_batch_asleep_until_its_window(make_driver, mode):
    d = make_driver(handlers("nightly_batch"), mode=mode, queues=("batch",))
    d.deploy(source("nightly-batch-item", 1))
    d.deploy(source("nightly-batch", 1))
    run = sample("nightly-batch", run_date="2099-06-01")  # the window is far ahead: it sleeps
    iid = d.engine.start("nightly-batch", run).instance_id
    view = d.run(iid, until=lambda v: any(t.wait_kind == "sleep" for t in v.tokens))
    wake = next(t.wake_at_ms for t in view.tokens if t.wait_kind == "sleep")
    d.deploy(source("nightly-batch-item", 2))
    v2 = d.deploy(source("nightly-batch", 2))
    plan = migrate(d, "nightly-batch", children=True)
    (move,) = plan["instances"][0]["moves"]
    assert (move["node"], move["timer"]) == ("sleep-1", "keep")
    after_move = d.engine.describe(iid)
    assert [t.wake_at_ms for t in after_move.tokens if t.wait_kind == "sleep"] == [wake]
    # The window opens (the test moves the clock of that one timer, not the instance).
    d.engine.db.write(
        lambda c: c.exec_driver_sql(
            "UPDATE wiggle_tokens SET wake_at_ms = 1 WHERE instance_id = "
            + ("?" if d.engine.db.is_sqlite else "%s")
            + " AND wait_kind = 'sleep'",
            (iid,),
        )
    )
    mark = len(d.ran)
    done = d.run(iid, timeout=90)
    assert done.status is InstanceStatus.COMPLETED and done.version == v2.version
    after = ran_after(d, mark)
    assert after[0] == "snapshot_ledger"
    assert after[-3:] == ["reconcile_totals", "publish_report", "archive_report"]
    assert after.count("archive_statement") == 2  # the children run the new item flow
    assert done.context["archived"] == "archive/reports/nightly/2099-06-01.csv"
    assert [r["account"] for r in done.context["settled"]] == ["ACC-1", "ACC-3"]
    assert all("statement_archived" in r for r in done.context["settled"])


# -- document-pipeline: before its first step ----------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_document_pipeline_before_its_first_step(make_driver, mode):
    d = make_driver(handlers("document_pipeline"), mode=mode, queues=("documents",))
    d.deploy(source("document-pipeline", 1))
    iid = d.engine.start("document-pipeline", sample("document-pipeline")).instance_id
    v2 = d.deploy(source("document-pipeline", 2))
    assert migrate(d, "document-pipeline")["summary"]["migrate"] == 1
    done = d.run(iid)
    assert done.status is InstanceStatus.COMPLETED and done.version == v2.version
    assert d.ran[-3:] == ["index_document", "publish_document", "notify_owner"]
    assert done.context["owner_notified"].startswith("document ")
    (ev,) = events_of(done, "instance_migrated")
    assert ev.detail["to"] == v2.version
