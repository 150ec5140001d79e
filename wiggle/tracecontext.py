"""W3C trace context and Wiggle's derived span identities: pure, no OpenTelemetry import.

Every process that traces an instance (the server and the workers of four languages) names the
spans it shares by the same functions, so none of them has to tell the others an id:

- the trace: the root instance's `traceparent` trace id when its start carried one, else
  `trace_id_for(root_instance_id)`;
- the instance span (the start, the parent of everything else in the instance's trace):
  `instance_span_id(instance_id)`;
- a step attempt's span: `step_span_id(instance_id, task_id, node_id, attempt, loop_counts)`.

Each id is the first bytes of the SHA-256 of a documented string (docs/observability.md,
"Identities"); the vectors in spec/tracing/ids.json hold every SDK to them.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "MAX_TRACESTATE",
    "TraceContext",
    "derive",
    "format_traceparent",
    "instance_span_id",
    "loops_key",
    "parse_traceparent",
    "parse_tracestate",
    "step_span_id",
    "trace_id_for",
]

#: The longest tracestate kept (W3C: 32 members of at most 256 characters would be 8 KiB; 512
#: is what most propagators keep). A longer one is dropped, the traceparent kept.
MAX_TRACESTATE = 512
_TRACEPARENT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$")
_MEMBER = re.compile(r"^[a-z0-9][a-z0-9_\-*/@]{0,255}=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}$")


@dataclass(frozen=True)
class TraceContext:
    """A parsed traceparent: 32 and 16 lowercase hex digits, and the flags byte."""

    trace_id: str
    span_id: str
    flags: int = 1

    @property
    def sampled(self) -> bool:
        return bool(self.flags & 1)

    def traceparent(self) -> str:
        return format_traceparent(self.trace_id, self.span_id, self.flags)


def parse_traceparent(value: str) -> TraceContext | None:
    """A W3C traceparent, or None when it is malformed, oversized or all-zero (the caller then
    starts a fresh context). Version ff is invalid; a future version's extra fields are ignored,
    version 00 allows none."""
    if not value or len(value) > 512:
        return None
    m = _TRACEPARENT.match(value.strip())
    if m is None:
        return None
    version, trace_id, span_id, flags, rest = m.groups()
    if version == "ff" or (version == "00" and rest):
        return None
    if trace_id == "0" * 32 or span_id == "0" * 16:
        return None
    return TraceContext(trace_id, span_id, int(flags, 16))


def parse_tracestate(value: str) -> str:
    """A tracestate kept as given when it is well formed and at most MAX_TRACESTATE characters;
    otherwise "" (dropped)."""
    if not value or len(value) > MAX_TRACESTATE:
        return ""
    members = [m.strip() for m in value.split(",") if m.strip()]
    if len(members) > 32 or not all(_MEMBER.match(m) for m in members):
        return ""
    return ",".join(members)


def format_traceparent(trace_id: str, span_id: str, flags: int = 1) -> str:
    return f"00-{trace_id}-{span_id}-{flags:02x}"


def _digest(text: str, size: int) -> str:
    raw = bytearray(hashlib.sha256(text.encode()).digest()[:size])
    if not any(raw):  # all-zero ids are invalid in W3C trace context
        raw[-1] = 1
    return raw.hex()


def trace_id_for(root_instance_id: str) -> str:
    """The trace of an instance tree whose start carried no traceparent."""
    return _digest(f"wiggle.trace\n{root_instance_id}", 16)


def instance_span_id(instance_id: str) -> str:
    """The instance's span: its start, the parent of its steps and the server's spans."""
    return _digest(f"wiggle.instance\n{instance_id}", 8)


def loops_key(loop_counts: Mapping[str, int]) -> str:
    """`id=count` of every loop the token is inside, sorted by id, joined by commas."""
    return ",".join(f"{k}={int(loop_counts[k])}" for k in sorted(loop_counts))


def step_span_id(
    instance_id: str, task_id: str, node_id: str, attempt: int, loop_counts: Mapping[str, int]
) -> str:
    """A step attempt's span. The token (`task_id`) tells apart the items of a for_each running
    one node at once, the loop counts the iterations of a loop (each starting at attempt 1)."""
    text = f"wiggle.step\n{instance_id}\n{task_id}\n{node_id}\n{attempt}\n{loops_key(loop_counts)}"
    return _digest(text, 8)


def derive(root_instance_id: str, traceparent: str) -> TraceContext:
    """The trace an instance tree is in: its start's traceparent (its trace id and flags), or
    the derived trace (sampled) when it carried none or an invalid one. `span_id` is the root's
    instance span."""
    found = parse_traceparent(traceparent)
    if found is None:
        return TraceContext(trace_id_for(root_instance_id), instance_span_id(root_instance_id))
    return TraceContext(found.trace_id, instance_span_id(root_instance_id), found.flags)
