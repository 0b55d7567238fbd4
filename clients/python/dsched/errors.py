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
from typing import ClassVar, Protocol

from dsched.states import WorkflowState

DOMAIN = "dsched"

# Bounds of what one error carries, so that any error (a 2,000-task cycle, 2,000 bad names) still
# fits the 8 KiB of trailers a gRPC client accepts by default: the status message travels twice
# (``grpc-message``, percent-encoded, and inside ``grpc-status-details-bin``), the details once,
# base64-encoded. The server's status mapping (``dsched_server.rpc.status``) also caps the encoded
# details; what is left out is counted in :attr:`DschedError.omitted_violations` and sent as
# ``ErrorInfo.metadata["omitted_violations"]``.
MAX_VIOLATIONS = 20
MAX_MESSAGE_BYTES = 512
MAX_FIELD_BYTES = 1024  # a safety net: field paths are built bounded (dsched.names.param_path)
MAX_DESCRIPTION_BYTES = 256
MAX_METADATA_ENTRIES = 6
MAX_METADATA_KEY_BYTES = 64
MAX_METADATA_VALUE_BYTES = 256
OMITTED_KEY = "omitted_violations"
_ELLIPSIS = "…"


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes (ending in an ellipsis when cut)."""
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= limit:
        return text
    room = limit - len(_ELLIPSIS.encode())
    return raw[:room].decode("utf-8", "ignore") + _ELLIPSIS


def render_violations(violations: Sequence[FieldViolation], omitted: int) -> str:
    """The `` (field: description; ...; and K more)`` suffix of an error's text ("" if none)."""
    parts = [f"{v.field}: {v.description}" for v in violations]
    if omitted:
        parts.append(f"and {omitted} more")
    return f" ({'; '.join(parts)})" if parts else ""


def with_violations(message: str, violations: Sequence[FieldViolation], omitted: int) -> str:
    """The text of a status: ``message`` and the rendered violations, clipped as a whole to
    :data:`MAX_MESSAGE_BYTES` (the details carry every violation in full)."""
    return clip(message + render_violations(violations, omitted), MAX_MESSAGE_BYTES)


def without_violations(text: str, violations: Sequence[FieldViolation], omitted: int) -> str:
    """Inverts :func:`with_violations`: the message without the (possibly clipped) suffix, since
    :class:`DschedError` renders the violations itself."""
    suffix = render_violations(violations, omitted)
    if not suffix or text.endswith(suffix):
        return text.removesuffix(suffix)
    if text.endswith(_ELLIPSIS):
        body = text.removesuffix(_ELLIPSIS)
        for cut in range(len(body)):  # the clipped suffix is a prefix of the full one
            if suffix.startswith(body[cut:]):
                return body[:cut]
    return text


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
        omitted: violations the sender of a decoded error left out.

    The message, the metadata and the violations are bounded (see :data:`MAX_VIOLATIONS` and the
    byte limits above): texts are clipped, violations past the first :data:`MAX_VIOLATIONS` are
    dropped and counted in :attr:`omitted_violations` (plus ``omitted``, the count an error that
    arrived over the wire says its sender left out).
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
        omitted: int = 0,
    ) -> None:
        message = clip(message, MAX_MESSAGE_BYTES)
        super().__init__(message)
        self.message = message
        self.reason = reason or self.default_reason
        self.metadata: dict[str, str] = {
            clip(k, MAX_METADATA_KEY_BYTES): clip(v, MAX_METADATA_VALUE_BYTES)
            for k, v in list((metadata or {}).items())[:MAX_METADATA_ENTRIES]
        }
        kept = violations[:MAX_VIOLATIONS]
        self.violations: tuple[FieldViolation, ...] = tuple(
            FieldViolation(
                clip(v.field, MAX_FIELD_BYTES),
                clip(v.description, MAX_DESCRIPTION_BYTES),
                clip(v.reason, MAX_METADATA_KEY_BYTES),
            )
            for v in kept
        )
        self.omitted_violations = max(0, omitted) + len(violations) - len(kept)

    @property
    def field(self) -> str | None:
        """The first violated field, if any (a convenience for the common one-field case)."""
        return self.violations[0].field if self.violations else None

    def __str__(self) -> str:
        return self.message + render_violations(self.violations, self.omitted_violations)


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


def version_mismatch(project: str, workflow: str, current: int, expected: int) -> Aborted:
    """VERSION_MISMATCH: an edit based on version ``expected`` of a workflow now at ``current``.

    One text for both sides: the server raises it when its conditional update finds another
    version, the SDK before it asks when it already knows.
    """
    return Aborted(
        f"workflow {project}/{workflow} is at version {current}, not {expected}; "
        "read it again and retry",
        reason="VERSION_MISMATCH",
        metadata={
            "project": project,
            "workflow": workflow,
            "current_version": str(current),
            "expected_version": str(expected),
        },
    )


class OutOfRange(DschedError):
    code = "OUT_OF_RANGE"
    default_reason = "OUT_OF_RANGE"


class ResourceExhausted(DschedError):
    code = "RESOURCE_EXHAUSTED"
    default_reason = "RESOURCE_EXHAUSTED"


class Unavailable(DschedError):
    code = "UNAVAILABLE"
    default_reason = "UNAVAILABLE"


class InstanceSnapshot(Protocol):
    """The instance a :class:`ControlPending` carries: a :class:`dsched.results.WorkflowInstance`
    (``results`` imports this module through ``spec``; naming the class here would close an import
    cycle)."""

    @property
    def id(self) -> int: ...

    @property
    def state(self) -> WorkflowState: ...


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

    def __init__(self, message: str, *, instance: InstanceSnapshot, request_id: str) -> None:
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
