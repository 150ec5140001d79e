"""An instance's trace as a link (`wiggle console --trace-url`; docs/observability.md).

The template is an operator's URL of their trace viewer with `{trace_id}` where the instance's
trace id (32 hex digits, `Instance.trace_id`) goes: Jaeger's
`http://jaeger:16686/trace/{trace_id}`, Tempo through Grafana's explore URL, and so on.
"""

from __future__ import annotations

from urllib.parse import quote, urlsplit

__all__ = ["PLACEHOLDER", "check_trace_url", "trace_link"]

PLACEHOLDER = "{trace_id}"


def check_trace_url(template: str) -> str | None:
    """What is wrong with `template`, or None: it must be an http(s) URL naming `{trace_id}`
    (a page link to any other scheme, `javascript:` say, is never drawn)."""
    if PLACEHOLDER not in template:
        return f"the trace URL must contain {PLACEHOLDER}, where the trace id goes"
    parts = urlsplit(template.replace(PLACEHOLDER, "0"))
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return "the trace URL must be an http:// or https:// address"
    return None


def trace_link(template: str | None, trace_id: str) -> str:
    """The link to `trace_id`'s trace, or "" (no template, or no trace id)."""
    if not template or not trace_id:
        return ""
    return template.replace(PLACEHOLDER, quote(trace_id, safe=""))
