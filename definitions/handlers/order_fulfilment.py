"""Handlers for definitions/order-fulfilment.yaml.

Stand-ins for the shop's real services, deterministic so the flow can be run and tested end to
end: stock levels are a table, the card processor approves every card except the test numbers
below, and "printing" a label just makes up its tracking number.
"""

from __future__ import annotations

import os
from typing import Any

from wiggle import NonRetryable, activity, step

Context = dict[str, Any]

# The warehouse, as far as this example knows it.
STOCK = {"KB-01": 25, "MS-02": 40, "MON-27": 3, "CBL-USB": 500}

# Test card numbers in the style of card processors' sandboxes.
DECLINED_CARD = "4000000000000002"


@activity
def validate(ctx: Context) -> Context:
    items = ctx.get("items") or []
    if not items:
        raise NonRetryable("an order needs at least one item")
    for item in items:
        if item.get("qty", 0) < 1:
            raise NonRetryable(f"item {item.get('sku')!r} has no quantity")
    total = sum(item["qty"] * item["price_cents"] for item in items)
    return {**ctx, "total_cents": total}


@activity
def in_stock(ctx: Context) -> bool:
    return all(STOCK.get(item["sku"], 0) >= item["qty"] for item in ctx["items"])


def payments_down() -> bool:
    """Rehearse an outage of the card processor: a worker started with ORDER_PAYMENTS_DOWN=1
    cannot reach it (docs/operations.md uses this to show a bulk retry)."""
    return os.environ.get("ORDER_PAYMENTS_DOWN") == "1"


@activity
def authorise(ctx: Context) -> Context:
    if payments_down():
        raise ConnectionError("card processor unreachable (timed out after 10 s)")
    if ctx["card"] == DECLINED_CARD:
        # A decline will not change on retry: fail the order now rather than five times.
        raise NonRetryable("card declined by the issuer")
    info = step()
    # The instance and node make an idempotency key: a retried authorisation is the same one.
    return {**ctx, "authorisation": f"auth-{info.instance_id}-{info.node_id}"}


@activity
def capture(ctx: Context) -> Context:
    return {**ctx, "captured_cents": ctx["total_cents"], "payment_ref": f"pay-{ctx['order_id']}"}


@activity
def reserve_stock(ctx: Context) -> Context:
    reserved = [{"sku": item["sku"], "qty": item["qty"]} for item in ctx["items"]]
    return {**ctx, "reserved": reserved}


@activity
def print_label(ctx: Context) -> Context:
    return {**ctx, "tracking": f"TRK-{ctx['order_id']}"}


@activity
def merge(joined: Context) -> Context:
    """The parallel's combine: each branch worked on its own copy, so take what each added."""
    order = joined["context"]
    payment = joined["results"]["payment"]
    shipping = joined["results"]["shipping"]
    return {
        **order,
        "payment": {"ref": payment["payment_ref"], "captured_cents": payment["captured_cents"]},
        "shipping": {"tracking": shipping["tracking"], "reserved": shipping["reserved"]},
    }


@activity
def notify(ctx: Context) -> Context:
    message = f"Order {ctx['order_id']} is on its way: {ctx['shipping']['tracking']}"
    return {**ctx, "notified": {"to": ctx["customer"], "message": message}}


# -- version 2 (definitions/v2/order-fulfilment.yaml) ----------------------------------------


@activity
def award_loyalty_points(ctx: Context) -> Context:
    """One point per whole currency unit spent."""
    return {**ctx, "loyalty_points": ctx["total_cents"] // 100}
