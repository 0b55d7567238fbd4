"""Mapping between :mod:`dsched.errors` and ``google.rpc.Status`` (the server side of the wire).

The SDK does the reverse in ``dsched.status``; both sides use the same ``reason`` strings.

Every status fits the trailers a client with default settings accepts (8 KiB of metadata). The
error itself is bounded (:mod:`dsched.errors`: message <= 512 bytes, <= 20 clipped violations,
<= 6 clipped metadata entries); here the serialized details are also kept under
:data:`MAX_DETAILS_BYTES`, dropping violations from the end (but never the first) and counting
them. The arithmetic: ``grpc-status-details-bin`` is base64 of the Status, ``grpc-message`` the
message percent-encoded (<= 3 * 512 B = 1.5 KiB), plus ``grpc-status`` and the HPACK entry
overheads (32 B each). With several violations the Status is under 3 KiB (base64: 4 KiB), so the
trailers are under 6 KiB; a lone violation (<= 1,024 B of field, 256 B of description) with the
largest metadata (6 entries of <= 320 B) and message makes a Status of at most 3.8 KiB (base64:
5.1 KiB), trailers under 7 KiB: always within the 8 KiB.
"""

from __future__ import annotations

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from dsched.errors import DOMAIN, OMITTED_KEY, DschedError, FieldViolation, with_violations

MAX_DETAILS_BYTES = 3 * 1024


def to_grpc_status(err: DschedError) -> grpc.Status:
    """Builds the status (code, message, ErrorInfo and BadRequest details) for ``err``."""
    violations = list(err.violations)
    omitted = err.omitted_violations
    while True:
        status = _status(err, violations, omitted)
        # The first violation always stays: it names the field a client most needs.
        if status.ByteSize() <= MAX_DETAILS_BYTES or len(violations) <= 1:
            break
        violations.pop()
        omitted += 1
    result: grpc.Status = rpc_status.to_status(status)
    return result


def _status(err: DschedError, violations: list[FieldViolation], omitted: int) -> status_pb2.Status:
    metadata = dict(err.metadata)
    if omitted:
        metadata[OMITTED_KEY] = str(omitted)
    info = error_details_pb2.ErrorInfo(reason=err.reason, domain=DOMAIN, metadata=metadata)
    details = [_pack(info)]
    if violations:
        bad = error_details_pb2.BadRequest(
            field_violations=[
                error_details_pb2.BadRequest.FieldViolation(
                    field=v.field, description=v.description, reason=v.reason
                )
                for v in violations
            ]
        )
        details.append(_pack(bad))
    return status_pb2.Status(
        code=code_pb2.Code.Value(err.code),
        message=with_violations(err.message, violations, omitted),
        details=details,
    )


def _pack(message: error_details_pb2.ErrorInfo | error_details_pb2.BadRequest) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message)
    return packed
