""":class:`LogRead` from the LogService requests, and the frames that answer them."""

from __future__ import annotations

from dsched.errors import FieldViolation, InvalidArgument
from dsched.v1 import log_service_pb2
from dsched_server.protocol.log_read import MAX_LOG_READ, LogRead
from dsched_server.protocol.wire import checks


def log_read_from_request(
    msg: log_service_pb2.ReadTaskLogRequest | log_service_pb2.TailTaskLogRequest,
) -> LogRead:
    """A length of 0 (and the tail request, which has none) means :data:`MAX_LOG_READ`; larger
    lengths are capped to it."""
    out: list[FieldViolation] = []
    checks.positive("task_instance_id", msg.task_instance_id, out)
    checks.not_negative("offset", msg.offset, out)
    length = msg.length if isinstance(msg, log_service_pb2.ReadTaskLogRequest) else 0
    checks.not_negative("length", length, out)
    if out:
        raise InvalidArgument("invalid log request", violations=out)
    return LogRead(msg.task_instance_id, msg.offset, min(length or MAX_LOG_READ, MAX_LOG_READ))


def read_log_response(
    data: bytes, *, offset: int, size: int, end_of_log: bool
) -> log_service_pb2.ReadTaskLogResponse:
    return log_service_pb2.ReadTaskLogResponse(
        data=data, offset=offset, next_offset=offset + len(data), size=size, end_of_log=end_of_log
    )


def tail_frame(
    data: bytes, *, offset: int, end_of_log: bool = False
) -> log_service_pb2.TailTaskLogResponse:
    return log_service_pb2.TailTaskLogResponse(
        data=data, offset=offset, next_offset=offset + len(data), end_of_log=end_of_log
    )
