"""The one place where server-side exceptions become gRPC statuses.

Handlers raise :class:`dsched.errors.DschedError` subclasses; this interceptor turns them into a
``google.rpc.Status`` with ``ErrorInfo`` (and ``BadRequest`` for invalid input). Any other
exception is a bug: it is logged with its traceback and answered with INTERNAL, without leaking
internals to the caller.

Only the reasons the contract lists (:mod:`dsched.reasons`) leave the server. A handler raising
another one is a bug the contract test missed (a reason computed at run time): it is logged, and the
caller gets the same status code with the code's generic reason. The code is kept, not turned into
INTERNAL, because it is what clients act on (UNAVAILABLE stays retryable, NOT_FOUND stays final).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeAlias

import grpc
from google.protobuf.message import DecodeError
from grpc import aio

from dsched.errors import DschedError, Internal, InvalidArgument
from dsched.reasons import LISTED
from dsched_server.rpc.status import to_grpc_status

log = logging.getLogger(__name__)

Handler: TypeAlias = "grpc.RpcMethodHandler[Any, Any]"


async def _abort(context: aio.ServicerContext[Any, Any], method: str, exc: Exception) -> None:
    if isinstance(exc, DschedError):
        err = exc
        if err.reason not in LISTED:
            log.error(
                "bug: %s raised reason %r, which the contract does not list "
                "(protos/dsched/v1/error_reason.proto); sent as %s",
                method,
                err.reason,
                err.code,
            )
            err.reason = err.code if err.code in LISTED else "INTERNAL"
    else:
        log.exception("unhandled error in %s", method, exc_info=exc)
        err = Internal("internal error", reason="INTERNAL", metadata={"method": method})
    await context.abort_with_status(to_grpc_status(err))


class ErrorInterceptor(aio.ServerInterceptor):
    """Wraps every handler so that exceptions reach the caller as rich statuses."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Handler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Handler | None:
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        method: str = handler_call_details.method
        if handler.unary_unary is not None:
            return _wrap_unary(handler, method)
        if handler.unary_stream is not None:
            return _wrap_unary_stream(handler, method)
        if handler.stream_stream is not None:
            return _wrap_stream_stream(handler, method)
        return handler  # stream-unary: dsched has none


def _decoder(handler: Handler) -> Callable[[bytes], Any]:
    """The handler's request deserializer, raising InvalidArgument for undecodable bytes.

    Requests are decoded inside the wrapped handler rather than by grpcio, so a malformed message
    is answered like any other bad input (INVALID_ARGUMENT with ErrorInfo), not grpcio's UNKNOWN.
    """
    decode = handler.request_deserializer or (lambda raw: raw)

    def run(raw: bytes) -> Any:
        try:
            return decode(raw)
        except (DecodeError, UnicodeDecodeError) as exc:
            raise InvalidArgument(
                f"the request is not a valid protobuf message: {exc}", reason="MALFORMED_REQUEST"
            ) from exc

    return run


def _wrap_unary(handler: Handler, method: str) -> Handler:
    inner: Any = handler.unary_unary
    decode = _decoder(handler)

    async def call(raw: bytes, context: aio.ServicerContext[Any, Any]) -> Any:
        try:
            return await inner(decode(raw), context)
        except aio.AbortError:
            raise
        except Exception as exc:  # the one catch-all: every error is mapped to a status here
            await _abort(context, method, exc)

    return grpc.unary_unary_rpc_method_handler(
        call, response_serializer=handler.response_serializer
    )


def _wrap_unary_stream(handler: Handler, method: str) -> Handler:
    inner: Any = handler.unary_stream
    decode = _decoder(handler)
    if not inspect.isasyncgenfunction(inner):
        # A coroutine that answers with context.write() (grpc_health's Watch does): await it.
        async def write_call(raw: bytes, context: aio.ServicerContext[Any, Any]) -> None:
            try:
                await inner(decode(raw), context)
            except aio.AbortError:
                raise
            except Exception as exc:  # mapped to a status, see module docstring
                await _abort(context, method, exc)

        return grpc.unary_stream_rpc_method_handler(
            write_call, response_serializer=handler.response_serializer
        )

    async def call(raw: bytes, context: aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
        try:
            async for item in inner(decode(raw), context):
                yield item
        except aio.AbortError:
            raise
        except Exception as exc:  # mapped to a status, see module docstring
            await _abort(context, method, exc)

    return grpc.unary_stream_rpc_method_handler(
        call, response_serializer=handler.response_serializer
    )


def _wrap_stream_stream(handler: Handler, method: str) -> Handler:
    inner: Any = handler.stream_stream
    decode = _decoder(handler)

    async def decoded(raw_requests: AsyncIterator[bytes]) -> AsyncIterator[Any]:
        async for raw in raw_requests:
            yield decode(raw)

    async def call(requests: Any, context: aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
        try:
            async for item in inner(decoded(requests), context):
                yield item
        except aio.AbortError:
            raise
        except Exception as exc:  # mapped to a status, see module docstring
            await _abort(context, method, exc)

    return grpc.stream_stream_rpc_method_handler(
        call, response_serializer=handler.response_serializer
    )
