"""Each definition's handlers, walked through its graph with the sample input and a few variants.

`walk` below follows the graph the way the engine does on one worker, with no database: tasks
replace the context, predicates choose, forks and for_each run their branches on copies and hand
the results to the join, sleeps pass at once, awaits take the next scripted signal (or time out
when none is left), and a subflow walks its child definition. It proves that the handlers and the
flows agree; the engine's own behaviour is tested elsewhere.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from wiggle.compiler import load_flow_file
from wiggle.graph import (
    Await,
    End,
    ExecutionMode,
    ForEach,
    Fork,
    Graph,
    Join,
    Predicate,
    Sleep,
    Subflow,
    Task,
)
from wiggle.worker import NonRetryable, Registry, StepInfo, load_handlers
from wiggle.worker._context import running

ROOT = Path(__file__).resolve().parents[3]
DEFINITIONS = ROOT / "definitions"


# A scripted signal that never comes: the await's deadline passes instead.
TIMEOUT = object()


class LoopLimit(Exception):
    pass


class Walker:
    def __init__(self, registry: Registry, signals: dict[str, list[Any]]) -> None:
        self.registry = registry
        self.signals = {name: list(payloads) for name, payloads in signals.items()}
        self.ran: list[str] = []

    def call(self, graph: Graph, node_id: str, activity: str, value: Any) -> Any:
        handler = self.registry.get(activity)
        assert handler is not None, f"no handler for {activity}"
        info = StepInfo(
            "instance-1",
            node_id,
            1,
            graph.name,
            graph.version,
            activity,
            ExecutionMode.SERVER,
            "task-1",
        )
        with running(info):
            result = handler.fn(copy.deepcopy(value))
        self.ran.append(node_id)
        return json.loads(json.dumps(result))  # contexts travel as JSON

    def walk(
        self, graph: Graph, ctx: Any, start: str | None = None, stop: str | None = None
    ) -> tuple[Any, bool]:
        """(final context, filtered) from `start` up to `stop` (a join) or the end."""
        node_id = start or graph.start
        loops: dict[str, int] = {}
        while node_id != stop:
            node = graph.nodes[node_id]
            if isinstance(node, Task):
                ctx, node_id = self.call(graph, node.id, node.activity, ctx), node.next
            elif isinstance(node, Predicate):
                value = self.call(graph, node.id, node.activity, ctx)
                assert isinstance(value, bool), f"{node.activity} returned {value!r}"
                if value and node.max_iterations is not None:
                    loops[node.id] = loops.get(node.id, 0) + 1
                    if loops[node.id] >= node.max_iterations:
                        raise LoopLimit(node.id)
                if value:
                    node_id = node.next
                elif node.alt is None:
                    return ctx, True
                else:
                    loops.pop(node.id, None)
                    node_id = node.alt
            elif isinstance(node, Fork):
                results = {}
                for name, first in node.branches.items():
                    out, filtered = self.walk(graph, copy.deepcopy(ctx), first, node.join)
                    if not filtered:
                        results[name] = out
                ctx, node_id = self._join(graph, node.join, ctx, results)
            elif isinstance(node, ForEach):
                items = _pointer(ctx, node.items)
                keyed = items.items() if isinstance(items, dict) else enumerate(items)
                outs = {
                    k: self.walk(graph, copy.deepcopy(v), node.body, node.join) for k, v in keyed
                }
                kept = {k: out for k, (out, filtered) in outs.items() if not filtered}
                results = kept if isinstance(items, dict) else list(kept.values())
                ctx, node_id = self._join(graph, node.join, ctx, results)
            elif isinstance(node, Sleep):
                node_id = node.next
            elif isinstance(node, Await):
                pending = self.signals.get(node.signal)
                payload = pending.pop(0) if pending else TIMEOUT
                if payload is not TIMEOUT:
                    if node.apply is not None:
                        ctx = self.call(
                            graph, node.id, node.apply.activity, {"context": ctx, "signal": payload}
                        )
                    node_id = node.next
                else:
                    assert node.on_timeout is not None, f"{node.signal} would wait forever"
                    node_id = node.on_timeout
            elif isinstance(node, Subflow):
                child = load_flow_file(DEFINITIONS / f"{node.flow}.yaml").graph
                ctx, _ = self.walk(child, ctx)
                node_id = node.next
            else:
                assert isinstance(node, End)
                return ctx, False
        return ctx, False

    def _join(self, graph: Graph, join_id: str, ctx: Any, results: Any) -> tuple[Any, str]:
        join = graph.nodes[join_id]
        assert isinstance(join, Join)
        combined = self.call(graph, join.id, join.activity, {"context": ctx, "results": results})
        return combined, join.next


def _pointer(doc: Any, pointer: str) -> Any:
    for part in pointer.split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


@pytest.fixture
def run() -> Callable[..., tuple[Any, bool, list[str]]]:
    def run_flow(
        stem: str,
        handlers: str,
        changes: dict[str, Any] | None = None,
        signals: dict[str, list[Any]] | None = None,
    ) -> tuple[Any, bool, list[str]]:
        graph = load_flow_file(DEFINITIONS / f"{stem}.yaml").graph
        registry = load_handlers(DEFINITIONS / "handlers" / f"{handlers}.py")
        sample = json.loads((DEFINITIONS / "samples" / f"{stem}.json").read_text())
        if changes:
            sample = {**sample, **changes}
        walker = Walker(registry, signals or {})
        ctx, filtered = walker.walk(graph, sample)
        return ctx, filtered, walker.ran

    return run_flow


def test_order_fulfilment(run):
    ctx, filtered, ran = run("order-fulfilment", "order_fulfilment")
    assert not filtered
    assert ctx["payment"] == {"ref": "pay-A-1001", "captured_cents": 9998}
    assert ctx["shipping"]["tracking"] == "TRK-A-1001"
    assert ctx["notified"]["to"] == "ada@example.com"
    assert ran[-1] == "notify"


def test_order_fulfilment_out_of_stock_is_filtered(run):
    items = [{"sku": "MON-27", "qty": 9, "price_cents": 19900}]
    _, filtered, ran = run("order-fulfilment", "order_fulfilment", {"items": items})
    assert filtered and ran == ["validate", "in_stock"]


def test_order_fulfilment_declined_card_is_final(run):
    with pytest.raises(NonRetryable, match="declined"):
        run("order-fulfilment", "order_fulfilment", {"card": "4000000000000002"})


def test_customer_onboarding_approved(run):
    signals = {"kyc_result": [{"status": "approved", "reference": "KYC-5521"}]}
    ctx, _, _ = run("customer-onboarding", "customer_onboarding", signals=signals)
    assert ctx["account"]["status"] == "active"
    assert ctx["emailed"]["template"] == "welcome"


def test_customer_onboarding_escalates_then_expires(run):
    ctx, _, ran = run("customer-onboarding", "customer_onboarding")
    assert "open_compliance_ticket" in ran and "expire_application" in ran
    assert ctx["account"]["status"] == "closed"
    assert ctx["emailed"]["template"] == "refusal_expired"


def test_customer_onboarding_escalation_approved_by_compliance(run):
    signals = {"compliance_decision": [{"approve": True, "officer": "sam"}]}
    ctx, _, _ = run("customer-onboarding", "customer_onboarding", signals=signals)
    assert ctx["kyc"]["status"] == "approved"
    assert ctx["account"]["status"] == "active"


def test_invoice_approval_chain(run):
    decisions = [
        {"approver": "engineering-lead", "approve": True},
        {"approver": "engineering-head", "approve": True},
    ]
    ctx, _, ran = run(
        "invoice-approval", "invoice_approval", signals={"approval_decision": decisions}
    )
    assert ctx["status"] == "approved"
    assert ctx["payment"]["scheduled"] is True
    assert ran.count("request_approval") == 2


def test_invoice_approval_small_invoice_is_automatic(run):
    ctx, _, ran = run("invoice-approval", "invoice_approval", {"amount_cents": 4200})
    assert ctx["approved_by"] == ["auto"]
    assert "request_approval" not in ran


def test_invoice_approval_delegates_a_silent_approver_then_rejects(run):
    decisions = [TIMEOUT, {"approver": "engineering-lead-deputy", "approve": False}]
    ctx, _, ran = run(
        "invoice-approval", "invoice_approval", signals={"approval_decision": decisions}
    )
    assert ctx["status"] == "rejected"
    assert ran.count("delegate_to_deputy") == 1
    assert ran[-2:] == ["return_to_submitter", "archive_invoice"]


def test_invoice_approval_nobody_answering_hits_max_iterations(run):
    with pytest.raises(LoopLimit, match="awaiting_more_approvals"):
        run("invoice-approval", "invoice_approval")


def test_document_pipeline_drops_blank_pages(run):
    ctx, _, _ = run("document-pipeline", "document_pipeline")
    assert [p["number"] for p in ctx["pages"]] == [1, 2, 4]
    assert ctx["kept_pages"] == 3
    assert ctx["published"] is True


def test_nightly_batch_settles_active_accounts(run):
    ctx, _, _ = run("nightly-batch", "nightly_batch")
    assert [r["account"] for r in ctx["settled"]] == ["ACC-1", "ACC-3"]
    assert ctx["skipped"] == ["ACC-2"]
    assert ctx["reconciled"] is True


@pytest.mark.parametrize(
    ("changes", "outcome", "charge"),
    [
        ({}, "paid", "succeeded"),
        ({"card_token": "tok_declined"}, "declined", "declined"),
        ({"address": "PO Box 12"}, "cancelled", "refunded"),
    ],
)
def test_payment_saga(run, changes, outcome, charge):
    ctx, _, _ = run("payment-saga", "payment_saga", changes)
    assert ctx["outcome"] == outcome
    assert ctx["charge"]["status"] == charge


def test_payment_saga_compensates_in_reverse(run):
    _, _, ran = run("payment-saga", "payment_saga", {"card_token": "tok_declined"})
    assert ran[-3:] == ["release_inventory", "cancel_payment_intent", "notify_payment_declined"]
    assert ran.index("charge_card") < ran.index("release_inventory")


def test_payment_saga_malformed_token_is_final(run):
    with pytest.raises(NonRetryable, match="malformed"):
        run("payment-saga", "payment_saga", {"card_token": "tok_malformed"})
