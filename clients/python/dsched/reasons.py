"""The ``ErrorInfo.reason`` strings dsched sends (domain ``dsched``), as the contract lists them.

``protos/dsched/v1/error_reason.proto`` is the contract: it says what each reason means and which
status code it comes with. On the wire a reason is the enum value's name without the
``ERROR_REASON_`` prefix; :class:`Reason` lists those strings for Python (a ``StrEnum``, so
``err.reason == Reason.WORKFLOW_ONLINE`` works on a plain string too).

``tests/unit/sdk/test_reasons.py`` keeps this list equal to the proto enum and fails on any reason
the source raises that neither lists; the server's error interceptor treats an unlisted reason as a
bug (``dsched_server.rpc.interceptor``). To add a reason: append it to the proto enum with the next
free number and a comment, add it here, then run ``make proto``.

Besides these, the SDK itself may put a status code's name (e.g. ``DEADLINE_EXCEEDED``) in
:attr:`dsched.errors.DschedError.reason` when a status comes without an ``ErrorInfo`` (from grpc
itself or a proxy, never from dsched).
"""

from __future__ import annotations

from enum import StrEnum

PROTO_PREFIX = "ERROR_REASON_"
"""The prefix of the proto enum's value names; the wire string is the name without it."""


class Reason(StrEnum):
    """Every reason a dsched server may send, in the proto enum's order."""

    UNKNOWN = "UNKNOWN"
    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    NOT_FOUND = "NOT_FOUND"
    ALREADY_EXISTS = "ALREADY_EXISTS"
    FAILED_PRECONDITION = "FAILED_PRECONDITION"
    ABORTED = "ABORTED"
    OUT_OF_RANGE = "OUT_OF_RANGE"
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"
    UNAVAILABLE = "UNAVAILABLE"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    INTERNAL = "INTERNAL"
    MALFORMED_REQUEST = "MALFORMED_REQUEST"
    INVALID_WORKFLOW = "INVALID_WORKFLOW"
    CYCLE_DETECTED = "CYCLE_DETECTED"
    VERSION_NOT_FOUND = "VERSION_NOT_FOUND"
    TASK_LOG_NOT_FOUND = "TASK_LOG_NOT_FOUND"
    LOG_NOT_STARTED = "LOG_NOT_STARTED"
    ILLEGAL_TRANSITION = "ILLEGAL_TRANSITION"
    WORKFLOW_OFFLINE = "WORKFLOW_OFFLINE"
    WORKFLOW_ONLINE = "WORKFLOW_ONLINE"
    WORKFLOW_HAS_RUNNING_INSTANCES = "WORKFLOW_HAS_RUNNING_INSTANCES"
    PROJECT_NOT_EMPTY = "PROJECT_NOT_EMPTY"
    INSTANCE_NOT_FINISHED = "INSTANCE_NOT_FINISHED"
    REQUEST_ID_REUSED = "REQUEST_ID_REUSED"
    ATTEMPT_CONFLICT = "ATTEMPT_CONFLICT"
    OWNERSHIP_LOST = "OWNERSHIP_LOST"
    CONFLICT = "CONFLICT"
    CONCURRENT_UPDATE = "CONCURRENT_UPDATE"
    CONCURRENT_MODIFICATION = "CONCURRENT_MODIFICATION"
    COMMAND_PENDING = "COMMAND_PENDING"
    FAILOVER_RACE = "FAILOVER_RACE"
    LOG_OFFSET_OUT_OF_RANGE = "LOG_OFFSET_OUT_OF_RANGE"
    CONCURRENT_CHANGE = "CONCURRENT_CHANGE"
    WORKER_UNAVAILABLE = "WORKER_UNAVAILABLE"
    UNKNOWN_ENUM_VALUE = "UNKNOWN_ENUM_VALUE"
    INVALID_PARAMETER_NAME = "INVALID_PARAMETER_NAME"
    RESERVED_PARAMETER_NAME = "RESERVED_PARAMETER_NAME"
    DATABASE_UNAVAILABLE = "DATABASE_UNAVAILABLE"
    OWNER_BUSY = "OWNER_BUSY"
    CONTROL_PENDING = "CONTROL_PENDING"
    INVALID_PAGE_TOKEN = "INVALID_PAGE_TOKEN"
    DEFINITION_TOO_LARGE = "DEFINITION_TOO_LARGE"
    REQUEST_TOO_LARGE = "REQUEST_TOO_LARGE"
    VERSION_MISMATCH = "VERSION_MISMATCH"
    ILLEGAL_BACKFILL_STATE = "ILLEGAL_BACKFILL_STATE"


LISTED: frozenset[str] = frozenset(r.value for r in Reason)
"""The wire strings of :class:`Reason`, for membership tests on plain strings."""
