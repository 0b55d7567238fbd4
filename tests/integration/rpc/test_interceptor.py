"""The error interceptor on a real gRPC server: only listed reasons leave it.

A handler that raises a reason the contract does not list (a bug the static scan in
tests/unit/sdk/test_reasons.py cannot see, e.g. one computed at run time) is answered with the same
status code and that code's generic reason, and the bug is logged with the original reason.
"""

from __future__ import annotations

import logging
from typing import Any

import grpc
import pytest
from grpc import aio

from dsched.errors import DschedError, NotFound, Unavailable
from dsched.reasons import Reason
from dsched_server.rpc.serving import Service, Serving
from tests.integration.api.conftest import Failure, failure

SERVICE = "dsched.test.Raiser"


def _raiser(errors: dict[str, Exception]) -> Service:
    """A service whose method ``<name>`` raises ``errors[name]``."""

    def handler(exc: Exception) -> grpc.RpcMethodHandler[bytes, bytes]:
        async def call(request: bytes, context: Any) -> bytes:
            raise exc

        return grpc.unary_unary_rpc_method_handler(call)

    def register(_servicer: object, server: aio.Server) -> None:
        handlers = {name: handler(exc) for name, exc in errors.items()}
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))

    return Service(SERVICE, object(), register)


async def _call(errors: dict[str, Exception], name: str) -> Failure:
    serving = Serving([_raiser(errors)], "127.0.0.1:0")
    port = await serving.start()
    try:
        async with aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            call: aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(
                f"/{SERVICE}/{name}"
            )
            return await failure(call(b""))
    finally:
        await serving.stop(0)


@pytest.mark.parametrize(
    ("exc", "code", "sent"),
    [
        (
            Unavailable("x", reason="MADE_UP_AT_RUN_TIME"),
            grpc.StatusCode.UNAVAILABLE,
            "UNAVAILABLE",
        ),
        (NotFound("x", reason="Not-A-Reason"), grpc.StatusCode.NOT_FOUND, "NOT_FOUND"),
        (DschedError("x", reason="ODD"), grpc.StatusCode.UNKNOWN, "UNKNOWN"),
    ],
)
async def test_an_unlisted_reason_keeps_its_code_and_is_logged(
    exc: DschedError, code: grpc.StatusCode, sent: str, caplog: pytest.LogCaptureFixture
) -> None:
    original = exc.reason
    with caplog.at_level(logging.ERROR, logger="dsched_server.rpc.interceptor"):
        got = await _call({"Raise": exc}, "Raise")
    assert (got.code, got.reason, got.domain) == (code, sent, "dsched")
    assert sent in set(Reason)
    [record] = [r for r in caplog.records if r.name == "dsched_server.rpc.interceptor"]
    assert original in record.getMessage()
    assert f"/{SERVICE}/Raise" in record.getMessage()


async def test_a_listed_reason_is_sent_as_it_is(caplog: pytest.LogCaptureFixture) -> None:
    exc = Unavailable("x", reason=Reason.WORKER_UNAVAILABLE, metadata={"worker": "w1"})
    got = await _call({"Raise": exc}, "Raise")
    assert (got.code, got.reason, got.metadata) == (
        grpc.StatusCode.UNAVAILABLE,
        "WORKER_UNAVAILABLE",
        {"worker": "w1"},
    )
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
