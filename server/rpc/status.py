"""Mapping between :mod:`dsched.errors` and ``google.rpc.Status`` (the server side of the wire).

The SDK does the reverse in ``dsched.client``; both sides use the same ``reason`` strings.
"""

from __future__ import annotations

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from dsched.errors import DOMAIN, DschedError


def to_grpc_status(err: DschedError) -> grpc.Status:
    """Builds the status (code, message, ErrorInfo and BadRequest details) for ``err``."""
    info = error_details_pb2.ErrorInfo(reason=err.reason, domain=DOMAIN, metadata=err.metadata)
    details = [_pack(info)]
    if err.violations:
        bad = error_details_pb2.BadRequest(
            field_violations=[
                error_details_pb2.BadRequest.FieldViolation(
                    field=v.field, description=v.description, reason=v.reason
                )
                for v in err.violations
            ]
        )
        details.append(_pack(bad))
    status = status_pb2.Status(
        code=code_pb2.Code.Value(err.code), message=str(err), details=details
    )
    result: grpc.Status = rpc_status.to_status(status)
    return result


def _pack(message: error_details_pb2.ErrorInfo | error_details_pb2.BadRequest) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message)
    return packed
