"""Field checks the decoders share. Each appends what is wrong to ``out`` (paths as in the error's
``BadRequest``) and returns a usable value, so one pass reports every bad field."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, TypeVar

from google.protobuf import duration_pb2, timestamp_pb2
from google.protobuf.internal.enum_type_wrapper import EnumTypeWrapper

from dsched.errors import FieldViolation
from dsched.names import INVALID_PARAMETER_NAME, param_name_problem, param_path
from dsched.spec import MAX_PARAM_VALUE_BYTES

log = logging.getLogger(__name__)
E = TypeVar("E", bound=StrEnum)

# Resolved parameters are global + local + upstream OUT values, so there may be more of them than a
# definition may declare; this only bounds the work a hostile message can cause.
MAX_RESOLVED_PARAMS = 4096
# Addresses are dialled and written into outbox file headers: no whitespace or control characters.
ADDRESS_RE = re.compile(r"[A-Za-z0-9._:\[\]%/-]{1,255}\Z")


def positive(path: str, value: int, out: list[FieldViolation]) -> None:
    if value <= 0:
        out.append(FieldViolation(path, "must be positive"))


def not_negative(path: str, value: int, out: list[FieldViolation]) -> None:
    if value < 0:
        out.append(FieldViolation(path, "must not be negative"))


def address_violation(path: str, value: str) -> FieldViolation | None:
    """Checks a ``host:port`` style address a worker may dial."""
    if not value:
        return FieldViolation(path, "must not be empty")
    if not ADDRESS_RE.match(value):
        return FieldViolation(path, "must be an address such as host:port")
    return None


def address(path: str, value: str, out: list[FieldViolation]) -> None:
    found = address_violation(path, value)
    if found is not None:
        out.append(found)


def same_named(source: object, names: Iterable[str]) -> dict[str, Any]:
    """The fields ``names`` of ``source`` by name: for the fields a value and its message share
    by name and type, so that a conversion lists them once for both directions (the round-trip
    tests in tests/unit/protocol check that they do mean the same)."""
    return {name: getattr(source, name) for name in names}


def value_problem(value: str) -> str | None:
    """Why a parameter value cannot reach a task's environment, or None."""
    if len(value.encode()) > MAX_PARAM_VALUE_BYTES:
        return "value is larger than 64 KiB"
    if "\x00" in value:
        return "value contains a NUL character"
    return None


def params(path: str, values: Mapping[str, str], out: list[FieldViolation]) -> None:
    """Names outside the grammar are refused; reserved names are accepted here and left out of
    the task's environment with a note in its log (:mod:`dsched_worker.tasks.environment`), so
    that a definition stored before a name became reserved still runs."""
    if len(values) > MAX_RESOLVED_PARAMS:
        out.append(FieldViolation(path, f"more than {MAX_RESOLVED_PARAMS} parameters"))
        return
    for key, value in values.items():
        where = param_path(path, key)
        problem = param_name_problem(key)
        if problem is not None and problem[0] == INVALID_PARAMETER_NAME:
            out.append(FieldViolation(where, problem[1], problem[0]))
        found = value_problem(value)
        if found is not None:
            out.append(FieldViolation(where, found))


def receivable_params(task_instance_id: int, values: Mapping[str, str]) -> dict[str, str]:
    """A task's OUT parameters without those no task may receive: a name :mod:`dsched.names`
    refuses, a NUL or an over-long value. A worker drops them before it reports; an older or a
    forged one might not, and they would reach the next task's environment and the var pool."""
    kept: dict[str, str] = {}
    for name, value in values.items():
        if param_name_problem(name) is None and value_problem(value) is None:
            kept[name] = value
        else:
            log.warning(
                "task instance %d reported an OUT parameter no task may receive; dropped: %r",
                task_instance_id,
                name[:128],
            )
    return kept


def timestamp(path: str, msg: timestamp_pb2.Timestamp, out: list[FieldViolation]) -> datetime:
    """The time, or (for a value outside the years 1..9999) a violation and the epoch."""
    try:
        return msg.ToDatetime(tzinfo=UTC)
    except (ValueError, OverflowError):
        out.append(FieldViolation(path, "must be a valid time"))
        return datetime.fromtimestamp(0, UTC)


def duration(
    path: str, msg: duration_pb2.Duration, limit: timedelta, out: list[FieldViolation]
) -> timedelta:
    """A duration from zero to ``limit``, or a violation and zero."""
    if msg.seconds < 0 or msg.nanos < 0:
        out.append(FieldViolation(path, "must not be negative"))
        return timedelta(0)
    # Compared before converting: a huge count of seconds does not fit a timedelta.
    if msg.seconds > limit.total_seconds() or not msg.nanos < 1_000_000_000:
        out.append(FieldViolation(path, f"must be at most {limit}"))
        return timedelta(0)
    value = msg.ToTimedelta()
    if value > limit:
        out.append(FieldViolation(path, f"must be at most {limit}"))
    return value


def to_timestamp(value: datetime) -> timestamp_pb2.Timestamp:
    # Exact integer arithmetic, as Timestamp.FromDatetime does, at a third of its cost (4 -> 1.3
    # us; two per task event).
    since = value.astimezone(UTC) - _EPOCH
    return timestamp_pb2.Timestamp(
        seconds=since.days * 86400 + since.seconds, nanos=since.microseconds * 1000
    )


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_duration(value: timedelta) -> duration_pb2.Duration:
    d = duration_pb2.Duration()
    d.FromTimedelta(value)
    return d


def enum_member(kind: type[E], names: EnumTypeWrapper, prefix: str, value: int) -> E | None:
    """The member of ``kind`` named as proto enum value ``value`` without ``prefix``, or None for
    a number the proto does not know or a value ``kind`` has no member for."""
    try:
        return kind(names.Name(value).removeprefix(prefix))
    except ValueError:
        return None
