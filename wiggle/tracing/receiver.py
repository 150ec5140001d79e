"""A small OTLP/gRPC trace receiver: collects the spans exported to it and prints them as trees.

The trace tests export to it (tests/integration/fleet/test_traces.py), and
`wiggle trace-receiver` (or `python -m wiggle.tracing.receiver`) runs it for a person: point
OTEL_EXPORTER_OTLP_ENDPOINT at it and it prints each trace as a tree of spans, with their
services, durations and links (docs/observability.md). It is built on the OTLP protobuf service
definitions (the `opentelemetry-proto` package), with no collector.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

__all__ = ["Receiver", "Span", "render"]


@dataclass(frozen=True)
class Span:
    """One received span, ids in lowercase hex."""

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    service: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)
    links: tuple[tuple[str, str], ...] = ()  # (trace id, span id)
    error: bool = False
    kind: int = 0


def _value(v: Any) -> Any:
    which = v.WhichOneof("value")
    if which == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, which) if which else None


def _spans(request: Any) -> Iterable[Span]:
    for rs in request.resource_spans:
        resource = {a.key: _value(a.value) for a in rs.resource.attributes}
        service = str(resource.get("service.name", ""))
        for ss in rs.scope_spans:
            for s in ss.spans:
                yield Span(
                    trace_id=s.trace_id.hex(),
                    span_id=s.span_id.hex(),
                    parent_span_id=s.parent_span_id.hex(),
                    name=s.name,
                    service=service,
                    start_ns=s.start_time_unix_nano,
                    end_ns=s.end_time_unix_nano,
                    attributes={a.key: _value(a.value) for a in s.attributes},
                    links=tuple((ln.trace_id.hex(), ln.span_id.hex()) for ln in s.links),
                    error=s.status.code == 2,
                    kind=s.kind,
                )


class Receiver(trace_service_pb2_grpc.TraceServiceServicer):
    """An OTLP TraceService on `address` (port 0: any free one) that keeps every span."""

    def __init__(
        self, address: str = "127.0.0.1:0", on_spans: Callable[[list[Span]], None] | None = None
    ) -> None:
        self.spans: list[Span] = []
        self._cond = threading.Condition()
        self._on_spans = on_spans
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self, self._server)  # type: ignore[no-untyped-call]
        self.port = self._server.add_insecure_port(address)
        self.address = f"{address.rsplit(':', 1)[0]}:{self.port}"

    def Export(self, request: Any, context: Any) -> Any:
        got = list(_spans(request))
        with self._cond:
            self.spans.extend(got)
            self._cond.notify_all()
        if self._on_spans is not None:
            self._on_spans(got)
        return trace_service_pb2.ExportTraceServiceResponse()

    def start(self) -> Receiver:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop(0).wait()

    def wait_for(self, check: Callable[[list[Span]], bool], timeout_s: float) -> list[Span]:
        """The spans once `check(spans)` holds; TimeoutError (with what came) otherwise."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while not check(self.spans):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"spans received: {render(self.spans)}")
                self._cond.wait(left)
            return list(self.spans)


def render(spans: Iterable[Span]) -> str:
    """Each trace as a tree: children under their parent, oldest first; a span whose parent was
    not received (the caller's, or not exported yet) at the top, marked `^parent`."""
    spans = list(spans)
    lines: list[str] = []
    for trace_id in sorted({s.trace_id for s in spans}, key=lambda t: _first(spans, t)):
        mine = sorted((s for s in spans if s.trace_id == trace_id), key=lambda s: s.start_ns)
        ids = {s.span_id for s in mine}
        kids: dict[str, list[Span]] = {}
        for s in mine:
            kids.setdefault(s.parent_span_id if s.parent_span_id in ids else "", []).append(s)
        lines.append(f"trace {trace_id}")
        _walk(lines, kids, "", 0, mine[0].start_ns)
    return "\n".join(lines)


def _walk(lines: list[str], kids: dict[str, list[Span]], parent: str, depth: int, t0: int) -> None:
    for s in kids.get(parent, []):
        ms = (s.end_ns - s.start_ns) / 1e6
        at = (s.start_ns - t0) / 1e6
        note = []
        if depth == 0 and s.parent_span_id:
            note.append("^" + s.parent_span_id)
        if s.links:
            note.append("links " + ",".join(sp for _, sp in s.links))
        if s.error:
            note.append("ERROR")
        extra = f"  ({'; '.join(note)})" if note else ""
        lines.append(
            f"{'  ' * (depth + 1)}{s.name}  [{s.service}] {s.span_id} +{at:.1f}ms {ms:.1f}ms{extra}"
        )
        _walk(lines, kids, s.span_id, depth + 1, t0)


def _first(spans: list[Span], trace_id: str) -> int:
    return min(s.start_ns for s in spans if s.trace_id == trace_id)


def serve(address: str, write: Callable[[str], None], stop: threading.Event | None = None) -> None:
    """Receive on `address`, writing each trace's tree (`render`) as its spans arrive, until
    `stop` is set (None: until Ctrl-C)."""
    receiver: Receiver

    def show(got: list[Span]) -> None:
        traces = {s.trace_id for s in got}
        write(render(s for s in receiver.spans if s.trace_id in traces))

    receiver = Receiver(address, on_spans=show).start()
    write(f"OTLP/gRPC receiver on {receiver.address}")
    try:
        (stop or threading.Event()).wait()
    except KeyboardInterrupt:
        pass
    finally:
        receiver.stop()


def main(argv: list[str] | None = None) -> None:
    """`python -m wiggle.tracing.receiver [--address HOST:PORT]` (`wiggle trace-receiver`):
    print each trace as its spans arrive, until Ctrl-C."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--address", default="127.0.0.1:4317")
    args = parser.parse_args(argv)
    serve(args.address, lambda text: print(text, flush=True))


if __name__ == "__main__":
    main()
