"""Every dsched error maps to a status whose trailers fit a default gRPC client's metadata limit.

The trailers of a failed call are ``grpc-status``, ``grpc-message`` (the status message,
percent-encoded) and ``grpc-status-details-bin`` (the serialized Status, base64). HPACK counts each
entry as name + value + 32 bytes; a client with default settings refuses more than 8 KiB
(``grpc.max_metadata_size``), turning the error into RESOURCE_EXHAUSTED.
"""

from __future__ import annotations

import base64
import urllib.parse

import pytest
from google.rpc import error_details_pb2, status_pb2

from dsched.errors import (
    MAX_MESSAGE_BYTES,
    MAX_VIOLATIONS,
    OMITTED_KEY,
    FieldViolation,
    InvalidArgument,
    InvalidWorkflow,
    NotFound,
    without_violations,
)
from dsched_server.rpc.status import MAX_DETAILS_BYTES, to_grpc_status

DEFAULT_CLIENT_METADATA_LIMIT = 8 * 1024
HPACK_ENTRY_OVERHEAD = 32


def trailer_bytes(status: status_pb2.Status) -> int:
    """What the trailers of ``status`` weigh against the client's limit (an upper bound: the
    message is counted fully percent-encoded, as grpc does for every byte outside printable
    ASCII)."""
    entries = {
        "grpc-status": str(status.code),
        "grpc-message": urllib.parse.quote(status.message, safe=""),
        "grpc-status-details-bin": base64.b64encode(status.SerializeToString()).decode(),
    }
    return sum(len(k) + len(v) + HPACK_ENTRY_OVERHEAD for k, v in entries.items())


def decoded(err: InvalidArgument | NotFound) -> status_pb2.Status:
    status = status_pb2.Status()
    for key, value in to_grpc_status(err).trailing_metadata:
        if key == "grpc-status-details-bin":
            status.ParseFromString(value)
    return status


WIDE = "\U0001f600" * 5000  # 20,000 UTF-8 bytes: percent-encoded it is 60,000 characters


def hostile_errors() -> list[InvalidArgument | NotFound]:
    many = [FieldViolation(f"workflow.tasks[{i}].{WIDE}", WIDE) for i in range(2000)]
    one = [FieldViolation(WIDE, WIDE)]
    big_metadata = {f"{i}{WIDE}": WIDE for i in range(100)}
    return [
        InvalidWorkflow(WIDE, reason="CYCLE_DETECTED", violations=many),
        InvalidWorkflow(WIDE, metadata=big_metadata, violations=one),
        InvalidArgument("x", violations=[FieldViolation("f", "short")] * 5000),
        NotFound(WIDE, metadata={f"{i}{WIDE}": WIDE for i in range(100)}),
    ]


@pytest.mark.parametrize(
    "err", hostile_errors(), ids=["wide violations", "one violation, wide", "many", "metadata"]
)
def test_any_error_fits_the_default_metadata_limit(err: InvalidArgument | NotFound) -> None:
    status = decoded(err)
    bad = [d for d in status.details if d.Is(error_details_pb2.BadRequest.DESCRIPTOR)]
    assert status.ByteSize() <= MAX_DETAILS_BYTES or len(bad) == 1
    assert len(status.message.encode()) <= MAX_MESSAGE_BYTES
    assert trailer_bytes(status) < DEFAULT_CLIENT_METADATA_LIMIT - 1024  # and some room to spare


def test_left_out_violations_are_counted() -> None:
    err = InvalidArgument("bad", violations=[FieldViolation(f"f{i}", "d") for i in range(2000)])
    assert len(err.violations) == MAX_VIOLATIONS
    assert err.omitted_violations == 2000 - MAX_VIOLATIONS
    assert str(err).endswith(f"; and {2000 - MAX_VIOLATIONS} more)")
    status = decoded(err)
    info, bad = error_details_pb2.ErrorInfo(), error_details_pb2.BadRequest()
    status.details[0].Unpack(info)
    status.details[1].Unpack(bad)
    assert len(bad.field_violations) + int(info.metadata[OMITTED_KEY]) == 2000
    assert [v.field for v in bad.field_violations] == [f"f{i}" for i in range(MAX_VIOLATIONS)]


def test_the_first_violation_always_arrives() -> None:
    err = InvalidArgument(
        WIDE,
        metadata={f"k{i}": WIDE for i in range(6)},
        violations=[FieldViolation("f" * 5000, WIDE)] * 3,
    )
    bad = error_details_pb2.BadRequest()
    decoded(err).details[1].Unpack(bad)
    assert [v.field for v in bad.field_violations] == ["f" * 1021 + "…"]


def test_details_over_budget_drop_violations_from_the_end() -> None:
    err = InvalidArgument("bad", violations=[FieldViolation(f"f{i}", WIDE) for i in range(30)])
    status = decoded(err)
    info, bad = error_details_pb2.ErrorInfo(), error_details_pb2.BadRequest()
    status.details[0].Unpack(info)
    status.details[1].Unpack(bad)
    kept = len(bad.field_violations)
    assert 0 < kept < MAX_VIOLATIONS
    assert int(info.metadata[OMITTED_KEY]) == 30 - kept
    assert [v.field for v in bad.field_violations] == [f"f{i}" for i in range(kept)]


def test_a_small_error_is_sent_whole() -> None:
    err = InvalidArgument("bad request", violations=[FieldViolation("name", "must not be empty")])
    status = decoded(err)
    assert status.message == "bad request (name: must not be empty)"
    info = error_details_pb2.ErrorInfo()
    status.details[0].Unpack(info)
    assert OMITTED_KEY not in info.metadata


@pytest.mark.parametrize("count", [1, 3, 20])
def test_the_sdk_recovers_the_message_from_a_clipped_status_text(count: int) -> None:
    violations = [FieldViolation(f"workflow.tasks[{i}].name", "x" * 200) for i in range(count)]
    err = InvalidArgument("workflow 'w' is invalid (really)", violations=violations)
    status = decoded(err)
    kept = status.details[1]
    bad = error_details_pb2.BadRequest()
    kept.Unpack(bad)
    sent = [FieldViolation(v.field, v.description) for v in bad.field_violations]
    info = error_details_pb2.ErrorInfo()
    status.details[0].Unpack(info)
    omitted = int(info.metadata.get(OMITTED_KEY, "0"))
    assert without_violations(status.message, sent, omitted) == "workflow 'w' is invalid (really)"
