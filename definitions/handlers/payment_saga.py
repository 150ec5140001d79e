"""Handlers for definitions/payment-saga.yaml.

The card processor is simulated by the card token: `tok_declined` is declined (a business
outcome the flow compensates for), `tok_malformed` is rejected as non-retryable (the instance
fails), `tok_flaky` fails its first two attempts (the retry policy absorbs it). An address
containing "PO Box" is refused by the carrier, which exercises the refund path.
"""

from __future__ import annotations

from typing import Any

from wiggle import NonRetryable, activity, step

Context = dict[str, Any]


class ProcessorUnavailable(Exception):
    """A transient processor error: retried by the step's policy."""


@activity
def create_payment_intent(ctx: Context) -> Context:
    return {**ctx, "intent": {"id": f"pi-{ctx['order_id']}", "status": "created"}}


@activity
def hold_inventory(ctx: Context) -> Context:
    return {**ctx, "inventory": {"hold": f"hold-{ctx['order_id']}", "status": "held"}}


@activity
def charge_card(ctx: Context) -> Context:
    token = ctx["card_token"]
    if token == "tok_malformed":
        raise NonRetryable("the card token is malformed")
    info = step()
    if token == "tok_flaky" and info.attempt < 3:
        raise ProcessorUnavailable(f"processor timed out (attempt {info.attempt})")
    status = "declined" if token == "tok_declined" else "succeeded"
    # One charge per instance and step, however often it is retried.
    key = f"{info.instance_id}:{info.node_id}"
    return {**ctx, "charge": {"status": status, "idempotency_key": key}}


@activity
def charge_declined(ctx: Context) -> bool:
    return bool(ctx["charge"]["status"] == "declined")


@activity
def release_inventory(ctx: Context) -> Context:
    return {**ctx, "inventory": {**ctx["inventory"], "status": "released"}}


@activity
def cancel_payment_intent(ctx: Context) -> Context:
    return {**ctx, "intent": {**ctx["intent"], "status": "cancelled"}}


@activity
def notify_payment_declined(ctx: Context) -> Context:
    return {**ctx, "outcome": "declined", "notified": ctx["customer"]}


@activity
def confirm_inventory(ctx: Context) -> Context:
    return {**ctx, "inventory": {**ctx["inventory"], "status": "reserved"}}


@activity
def book_shipment(ctx: Context) -> Context:
    refused = "po box" in ctx["address"].lower()
    shipment = {"status": "refused" if refused else "booked", "carrier": "parcel-co"}
    return {**ctx, "shipment": shipment}


@activity
def shipment_refused(ctx: Context) -> bool:
    return bool(ctx["shipment"]["status"] == "refused")


@activity
def refund_charge(ctx: Context) -> Context:
    return {**ctx, "charge": {**ctx["charge"], "status": "refunded"}}


@activity
def notify_order_cancelled(ctx: Context) -> Context:
    return {**ctx, "outcome": "cancelled", "notified": ctx["customer"]}


@activity
def send_receipt(ctx: Context) -> Context:
    return {**ctx, "outcome": "paid", "notified": ctx["customer"]}
