"""Mapping from a failed gRPC call back to :mod:`dsched.errors` (the SDK side of the wire).

The server's error interceptor sends every :class:`~dsched.errors.DschedError` as a
``google.rpc.Status`` with an ``ErrorInfo`` (reason, metadata) and, for bad input, a ``BadRequest``
(field violations). :func:`error_from_rpc` unpacks both and picks the class with
:func:`dsched.errors.error_class`, so ``except dsched.NotFound`` works the same on either side.
Statuses without details (from a proxy, a load balancer or grpc itself) map by code alone.
"""

from __future__ import annotations

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from dsched.errors import (
    DOMAIN,
    OMITTED_KEY,
    DschedError,
    FieldViolation,
    Unavailable,
    error_class,
    without_violations,
)


def status_code(err: grpc.RpcError) -> grpc.StatusCode:
    """The status code of a failed call (UNKNOWN for a bare RpcError, which grpc never raises)."""
    # Errors raised by calls are also grpc.Call objects; the stubs cannot express the union.
    code = getattr(err, "code", None)
    value = code() if callable(code) else None
    return value if isinstance(value, grpc.StatusCode) else grpc.StatusCode.UNKNOWN


def _text(err: grpc.RpcError) -> str:
    details = getattr(err, "details", None)
    value = details() if callable(details) else None
    return value if isinstance(value, str) else str(err)


def error_from_rpc(err: grpc.RpcError, target: str = "") -> DschedError:
    """Returns the :class:`DschedError` that ``err`` carries.

    Args:
        err: the exception a grpc call raised.
        target: the server address, named in the message of connection failures.

    Returns:
        An instance of the most specific class for the status code and ``ErrorInfo.reason``, with
        the reason, metadata and field violations of the status. A status without an ``ErrorInfo``
        gets the class's default reason (the code name for codes dsched has no class for, such as
        DEADLINE_EXCEEDED or CANCELLED).
    """
    code = status_code(err)
    message = _text(err)
    reason = ""
    metadata: dict[str, str] = {}
    violations: list[FieldViolation] = []
    try:
        status = rpc_status.from_call(err)
    except ValueError:  # the status details disagree with the call's code: trust the code
        status = None
    if status is not None:
        message = status.message or message
        for detail in status.details:
            if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                info = error_details_pb2.ErrorInfo()
                detail.Unpack(info)
                if info.domain in ("", DOMAIN):
                    reason = info.reason
                    metadata.update(info.metadata)
            elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
                bad = error_details_pb2.BadRequest()
                detail.Unpack(bad)
                violations.extend(
                    FieldViolation(v.field, v.description, v.reason) for v in bad.field_violations
                )
    omitted = _count(metadata.pop(OMITTED_KEY, ""))
    code_name: str = code.name
    cls = error_class(code_name, reason)
    if cls is Unavailable and not reason:
        # No ErrorInfo: grpc itself failed to reach the server (refused, DNS, TLS, reset).
        where = f" at {target}" if target else ""
        message = f"cannot reach the dsched server{where}: {message}"
    if cls is DschedError and not reason:
        reason = code_name
    return cls(
        without_violations(message, violations, omitted) or code_name,
        reason=reason or None,
        metadata=metadata,
        violations=violations,
        omitted=omitted,
    )


def _count(text: str) -> int:
    return int(text) if text.isdigit() and len(text) < 10 else 0
