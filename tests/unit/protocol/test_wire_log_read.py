"""Log reads on the wire: any read or tail request is a read within bounds or INVALID_ARGUMENT."""

from __future__ import annotations

from hypothesis import given

from dsched.errors import InvalidArgument
from dsched.v1 import log_service_pb2
from dsched_server.protocol.log_read import MAX_LOG_READ
from dsched_server.protocol.wire.log_read import (
    log_read_from_request,
    read_log_response,
    tail_frame,
)
from tests.unit.protocol.hostile import hostile


@given(hostile(log_service_pb2.ReadTaskLogRequest))
def test_any_read_request_is_a_bounded_read_or_invalid_argument(
    msg: log_service_pb2.ReadTaskLogRequest,
) -> None:
    try:
        read = log_read_from_request(msg)
    except InvalidArgument as err:
        assert err.violations
    else:
        assert (read.task_instance_id, read.offset) == (msg.task_instance_id, msg.offset)
        assert 1 <= read.length <= MAX_LOG_READ


@given(hostile(log_service_pb2.TailTaskLogRequest))
def test_any_tail_request_reads_at_most_the_limit_or_is_invalid_argument(
    msg: log_service_pb2.TailTaskLogRequest,
) -> None:
    try:
        read = log_read_from_request(msg)
    except InvalidArgument as err:
        assert err.violations
    else:
        assert read.length == MAX_LOG_READ


def test_frames_say_where_the_next_read_starts() -> None:
    assert read_log_response(b"abc", offset=5, size=9, end_of_log=False).next_offset == 8
    assert tail_frame(b"", offset=9, end_of_log=True).next_offset == 9
