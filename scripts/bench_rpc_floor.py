"""The floor of one gRPC call here: a unary health check on loopback, one in flight, client and
server in one Python process (grpcio's sync server, a thread pool as `wiggle server` uses).

Prints wall time and CPU time (both sides) per call. docs/performance.md compares a step's
budget with it: every SERVER or LOCAL_SYNC step is one such call plus the engine's work.
"""

from __future__ import annotations

import time
from concurrent import futures

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc


def main(calls: int = 3000, warmup: int = 500) -> None:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            request = health_pb2.HealthCheckRequest()
            for _ in range(warmup):
                stub.Check(request)
            wall, cpu = time.perf_counter(), time.process_time()
            for _ in range(calls):
                stub.Check(request)
            wall_ms = (time.perf_counter() - wall) * 1000 / calls
            cpu_ms = (time.process_time() - cpu) * 1000 / calls
    finally:
        server.stop(grace=None)
    print(f"one unary call on loopback, one in flight: {wall_ms:.3f} ms wall, {cpu_ms:.3f} ms CPU")


if __name__ == "__main__":
    main()
