"""The dsched exception tree, shared by the servers and the SDK.

Every error has a stable machine-readable ``reason`` (sent as ``google.rpc.ErrorInfo.reason``,
domain ``dsched``) and a canonical ``code`` (the name of a ``grpc.StatusCode``; only adapters turn
it into the enum). The server's error interceptor maps these to a ``google.rpc.Status``; the SDK
maps the status back to the same class, so ``except dsched.NotFound`` works on both sides of the
wire::

    DschedError                      (UNKNOWN)
    ├── InvalidArgument              (INVALID_ARGUMENT)  carries field violations
    │   └── InvalidWorkflow          a DAG that cannot run (cycle, unknown upstream, ...)
    ├── NotFound                     (NOT_FOUND)
    ├── AlreadyExists                (ALREADY_EXISTS)
    ├── FailedPrecondition           (FAILED_PRECONDITION)
    │   └── IllegalTransition        a state change the state machine forbids
    ├── Aborted                      (ABORTED)           a concurrent change won
    │   └── OwnershipLost            a fenced write found a newer owner epoch
    ├── OutOfRange                   (OUT_OF_RANGE)      e.g. a compacted cursor
    ├── ResourceExhausted            (RESOURCE_EXHAUSTED)
    ├── Unavailable                  (UNAVAILABLE)       retryable
    ├── ControlPending               (DEADLINE_EXCEEDED) raised by the SDK, never sent
    ├── PermissionDenied             (PERMISSION_DENIED)
    ├── Unauthenticated              (UNAUTHENTICATED)
    └── Internal                     (INTERNAL)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from dsched.results import WorkflowInstance

DOMAIN = "dsched"


@dataclass(frozen=True, slots=True)
class FieldViolation:
    """One bad field of a request: ``field`` is a dotted path such as ``workflow.tasks[2].name``.

    ``reason`` (optional, UPPER_SNAKE_CASE) classifies the violation; it travels as
    ``BadRequest.FieldViolation.reason``.
    """

    field: str
    description: str
    reason: str = ""


class DschedError(Exception):
    """Root of every dsched error.

    Args:
        message: human-readable text.
        reason: overrides the class's default ``reason`` (UPPER_SNAKE_CASE).
        metadata: extra machine-readable context, sent as ``ErrorInfo.metadata``.
        violations: bad fields, sent as ``BadRequest.field_violations``.
    """

    code: ClassVar[str] = "UNKNOWN"
    default_reason: ClassVar[str] = "UNKNOWN"

    def __init__(
        self,
        message: str,
        *,
        reason: str | None = None,
        metadata: Mapping[str, str] | None = None,
        violations: Sequence[FieldViolation] = (),
    ) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason or self.default_reason
        self.metadata: dict[str, str] = dict(metadata or {})
        self.violations: tuple[FieldViolation, ...] = tuple(violations)

    @property
    def field(self) -> str | None:
        """The first violated field, if any (a convenience for the common one-field case)."""
        return self.violations[0].field if self.violations else None

    def __str__(self) -> str:
        if not self.violations:
            return self.message
        fields = "; ".join(f"{v.field}: {v.description}" for v in self.violations)
        return f"{self.message} ({fields})"


class InvalidArgument(DschedError):
    code = "INVALID_ARGUMENT"
    default_reason = "INVALID_ARGUMENT"


class InvalidWorkflow(InvalidArgument):
    default_reason = "INVALID_WORKFLOW"


class NotFound(DschedError):
    code = "NOT_FOUND"
    default_reason = "NOT_FOUND"


class AlreadyExists(DschedError):
    code = "ALREADY_EXISTS"
    default_reason = "ALREADY_EXISTS"


class FailedPrecondition(DschedError):
    code = "FAILED_PRECONDITION"
    default_reason = "FAILED_PRECONDITION"


class IllegalTransition(FailedPrecondition):
    default_reason = "ILLEGAL_TRANSITION"


class Aborted(DschedError):
    code = "ABORTED"
    default_reason = "ABORTED"


class OwnershipLost(Aborted):
    default_reason = "OWNERSHIP_LOST"


class OutOfRange(DschedError):
    code = "OUT_OF_RANGE"
    default_reason = "OUT_OF_RANGE"


class ResourceExhausted(DschedError):
    code = "RESOURCE_EXHAUSTED"
    default_reason = "RESOURCE_EXHAUSTED"


class Unavailable(DschedError):
    code = "UNAVAILABLE"
    default_reason = "UNAVAILABLE"


class ControlPending(DschedError):
    """A pause or stop was recorded but not applied before the call's deadline: the master
    driving the instance is busy, unreachable, or dead and its instances are being taken over.

    It is still applied (or refused, if the instance ends first); the instance's events say which.
    Call again with the same ``request_id`` to wait again, or watch the instance. ``instance`` is
    the instance as it was when the call returned. The server answers such a call with status
    CONTROL_STATUS_PENDING; only the SDK turns that into this error.
    """

    code = "DEADLINE_EXCEEDED"
    default_reason = "CONTROL_PENDING"

    def __init__(self, message: str, *, instance: WorkflowInstance, request_id: str) -> None:
        super().__init__(
            message,
            metadata={
                "instance": str(instance.id),
                "state": instance.state.value,
                "request_id": request_id,
            },
        )
        self.instance = instance
        self.request_id = request_id


class PermissionDenied(DschedError):
    code = "PERMISSION_DENIED"
    default_reason = "PERMISSION_DENIED"


class Unauthenticated(DschedError):
    code = "UNAUTHENTICATED"
    default_reason = "UNAUTHENTICATED"


class Internal(DschedError):
    code = "INTERNAL"
    default_reason = "INTERNAL"


# Most specific class per (code, reason) first; the SDK falls back to the class of the code alone.
_BY_REASON: dict[str, type[DschedError]] = {
    "INVALID_WORKFLOW": InvalidWorkflow,
    "CYCLE_DETECTED": InvalidWorkflow,
    "ILLEGAL_TRANSITION": IllegalTransition,
    "OWNERSHIP_LOST": OwnershipLost,
}
_BY_CODE: dict[str, type[DschedError]] = {
    cls.code: cls
    for cls in (
        InvalidArgument,
        NotFound,
        AlreadyExists,
        FailedPrecondition,
        Aborted,
        OutOfRange,
        ResourceExhausted,
        Unavailable,
        PermissionDenied,
        Unauthenticated,
        Internal,
    )
}


def error_class(code: str, reason: str) -> type[DschedError]:
    """Returns the exception class for a status code name and an ErrorInfo reason."""
    cls = _BY_REASON.get(reason)
    if cls is not None and cls.code == code:
        return cls
    return _BY_CODE.get(code, DschedError)
