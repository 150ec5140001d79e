"""Handlers for definitions/document-pipeline.yaml.

No real OCR here: a page's "text" is made up from its number, and the pages listed in the
input's `blank_pages` come back empty so the filter has something to drop.
"""

from __future__ import annotations

from typing import Any

from wiggle import NonRetryable, activity

Context = dict[str, Any]

_KINDS = ("cover", "terms", "schedule", "signatures")


@activity
def fetch_document(ctx: Context) -> Context:
    if not ctx["url"].startswith(("s3://", "https://")):
        raise NonRetryable(f"cannot fetch {ctx['url']!r}: only s3:// and https:// are supported")
    return {**ctx, "fetched": True}


@activity
def split_pages(ctx: Context) -> Context:
    blank = set(ctx.get("blank_pages", []))
    pages = [
        {"document_id": ctx["document_id"], "number": n, "blank": n in blank}
        for n in range(1, ctx["page_count"] + 1)
    ]
    return {**ctx, "pages": pages}


@activity
def ocr_page(page: Context) -> Context:
    """Runs once per page: the page is this branch's whole context."""
    text = "" if page["blank"] else f"page {page['number']} of {page['document_id']}"
    return {**page, "text": text}


@activity
def page_has_text(page: Context) -> bool:
    return bool(page["text"].strip())


@activity
def classify_page(page: Context) -> Context:
    return {**page, "kind": _KINDS[(page["number"] - 1) % len(_KINDS)]}


@activity
def extract_fields(page: Context) -> Context:
    return {**page, "fields": {"words": len(page["text"].split())}}


@activity
def assemble_document(joined: Context) -> Context:
    """The for_each's combine: `results` holds the non-blank pages, in page order."""
    doc = {key: value for key, value in joined["context"].items() if key != "pages"}
    pages = [
        {"number": p["number"], "kind": p["kind"], "fields": p["fields"]} for p in joined["results"]
    ]
    return {**doc, "pages": pages, "kept_pages": len(pages)}


@activity
def index_document(ctx: Context) -> Context:
    return {**ctx, "index": f"documents/{ctx['document_id']}"}


@activity
def publish_document(ctx: Context) -> Context:
    return {**ctx, "published": True}


# -- version 2 (definitions/v2/document-pipeline.yaml) ---------------------------------------


@activity
def notify_owner(ctx: Context) -> Context:
    return {**ctx, "owner_notified": f"document {ctx['document_id']} is published"}
