"""The floor of one gRPC exchange here, one in flight on loopback, client and server in one
Python process: a unary call on grpcio's sync server (a thread pool, as `wiggle server` uses),
the same call on grpcio's asyncio server, and one message each way on an open bidirectional
stream of the sync server.

Prints wall time and CPU time (both sides) per exchange. docs/performance.md compares a step's
budget with it: every SERVER or LOCAL_SYNC step is one unary call plus the engine's work, and
the other two rows say what another RPC shape or server would save.
"""

from __future__ import annotations

import argparse
import asyncio
import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any

import grpc

PAYLOAD = b"x" * 100  # about a lone report's size


def _same(data: bytes) -> bytes:
    return data


def _handlers(unary: Callable[..., Any], stream: Callable[..., Any]) -> Any:
    kw: dict[str, Any] = {"request_deserializer": _same, "response_serializer": _same}
    return grpc.method_handlers_generic_handler(
        "floor.Echo",
        {
            "Unary": grpc.unary_unary_rpc_method_handler(unary, **kw),
            "Stream": grpc.stream_stream_rpc_method_handler(stream, **kw),
        },
    )


def _echo(request: bytes, context: object) -> bytes:
    return request


def _echo_stream(requests: Iterator[bytes], context: object) -> Iterator[bytes]:
    yield from requests


def _measure(label: str, exchange: Callable[[], object], calls: int, warmup: int) -> None:
    for _ in range(warmup):
        exchange()
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        exchange()
    wall_ms = (time.perf_counter() - wall) * 1000 / calls
    cpu_ms = (time.process_time() - cpu) * 1000 / calls
    print(f"{label:<34} {wall_ms:6.3f} ms wall  {cpu_ms:6.3f} ms CPU")


def _unary(port: int, label: str, calls: int, warmup: int) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary(
            "/floor.Echo/Unary", request_serializer=_same, response_deserializer=_same
        )
        _measure(label, lambda: call(PAYLOAD), calls, warmup)


def _stream(port: int, label: str, calls: int, warmup: int) -> None:
    outbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()

    def requests() -> Iterator[bytes]:
        while (message := outbox.get()) is not None:
            yield message

    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.stream_stream(
            "/floor.Echo/Stream", request_serializer=_same, response_deserializer=_same
        )
        answers: Any = call(requests())

        def exchange() -> object:
            outbox.put(PAYLOAD)
            return next(answers)

        _measure(label, exchange, calls, warmup)
        outbox.put(None)


def _asyncio_server() -> int:
    """An asyncio server on its own thread's loop; its port."""
    started: queue.SimpleQueue[int] = queue.SimpleQueue()

    async def echo(request: bytes, context: object) -> bytes:
        return request

    async def echo_stream(requests: Any, context: object) -> Any:
        async for message in requests:
            yield message

    async def serve() -> None:
        server = grpc.aio.server()
        server.add_generic_rpc_handlers((_handlers(echo, echo_stream),))
        started.put(server.add_insecure_port("127.0.0.1:0"))
        await server.start()
        await server.wait_for_termination()

    threading.Thread(target=lambda: asyncio.run(serve()), daemon=True).start()
    return started.get()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--warmup", type=int, default=500)
    args = parser.parse_args()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    server.add_generic_rpc_handlers((_handlers(_echo, _echo_stream),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        print("one exchange on loopback, one in flight, both sides in this process:")
        _unary(port, "unary call, sync server", args.calls, args.warmup)
        _stream(port, "bidirectional stream, sync server", args.calls, args.warmup)
    finally:
        server.stop(grace=None)
    _unary(_asyncio_server(), "unary call, asyncio server", args.calls, args.warmup)


if __name__ == "__main__":
    main()
