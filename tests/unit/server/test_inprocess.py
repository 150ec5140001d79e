"""InProcessStub: a servicer's methods called as a stub's, with a server's interceptors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
import pytest

from wiggle.server import InProcessRpcError, InProcessStub


class Servicer:
    """Echoes the request, or ends the call with a status as the services do."""

    def __init__(self) -> None:
        self.contexts: list[Any] = []

    def Echo(self, request: Any, context: Any) -> Any:
        self.contexts.append(context)
        return ("echo", request)

    def Refuse(self, request: Any, context: Any) -> Any:
        context.set_trailing_metadata([("wiggle-error-code", "not_found")])
        context.abort(grpc.StatusCode.NOT_FOUND, f"no {request}")


class Tagging(grpc.ServerInterceptor):  # type: ignore[type-arg]
    """Wraps each answer in its tag and notes the methods it saw and how the inner call ended."""

    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.methods: list[str] = []
        self.ended: list[str] = []

    def intercept_service(self, continuation: Callable[..., Any], details: Any) -> Any:
        self.methods.append(details.method)
        inner = continuation(details).unary_unary

        def serve(request: Any, context: Any) -> Any:
            try:
                answer = inner(request, context)
            except grpc.RpcError:
                self.ended.append(context.code().name)
                raise
            self.ended.append("OK")
            return (self.tag, answer)

        return grpc.unary_unary_rpc_method_handler(serve)


def test_a_call_runs_the_method_and_is_counted() -> None:
    stub = InProcessStub(Servicer())
    assert stub.Echo("hi", timeout=5) == ("echo", "hi")
    assert stub.Echo("again") == ("echo", "again")
    assert stub.counts == {"Echo": 2} and stub.calls == 2


def test_an_aborted_call_raises_what_a_channel_would() -> None:
    with pytest.raises(InProcessRpcError) as caught:
        InProcessStub(Servicer()).Refuse("order-1")
    assert caught.value.code() is grpc.StatusCode.NOT_FOUND
    assert caught.value.details() == "no order-1"
    assert tuple(caught.value.trailing_metadata()) == (("wiggle-error-code", "not_found"),)


def test_interceptors_wrap_each_method_first_outermost_with_its_full_name() -> None:
    outer, inner = Tagging("outer"), Tagging("inner")
    stub = InProcessStub(Servicer(), service="pkg.Service", interceptors=[outer, inner])
    assert stub.Echo("x") == ("outer", ("inner", ("echo", "x")))
    with pytest.raises(InProcessRpcError):
        stub.Refuse("y")
    assert outer.methods == inner.methods == ["/pkg.Service/Echo", "/pkg.Service/Refuse"]
    # The status the method ended with is on the context, as a server's context has it.
    assert outer.ended == inner.ended == ["OK", "NOT_FOUND"]
    stub.Echo("z")
    assert outer.methods == ["/pkg.Service/Echo", "/pkg.Service/Refuse"]  # built once per method


def test_a_caller_that_alive_says_is_gone_is_no_longer_active() -> None:
    servicer = Servicer()
    here = [True]
    stub = InProcessStub(servicer, alive=lambda: here[0])
    stub.Echo("x", timeout=60)
    context = servicer.contexts[-1]
    assert context.is_active()
    here[0] = False
    assert not context.is_active()  # a long poll then ends and hands back what it claimed
    assert InProcessStub(servicer).Echo("x") == ("echo", "x")
    assert servicer.contexts[-1].is_active()  # no alive, no deadline: active
