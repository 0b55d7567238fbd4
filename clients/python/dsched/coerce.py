"""Normalisation of user input into the SDK's value types: option names, durations, parameters.

Users write ``priority="high"``, ``retry_interval=30`` or ``params={"n": 3}`` in scripts and on
the command line; the rest of the SDK only sees enum members, :class:`~datetime.timedelta` and
``dict[str, str]``. Bad input raises :class:`~dsched.errors.InvalidArgument` naming the option,
before anything is sent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import TypeVar

from dsched.errors import FieldViolation, InvalidArgument

E = TypeVar("E", bound=StrEnum)

Seconds = timedelta | int | float


def enum_value(kind: type[E], value: E | str, option: str) -> E:
    """Returns the member of ``kind`` named ``value`` (case-insensitive; ``-`` may stand for ``_``).

    Raises:
        InvalidArgument: ``value`` names no member; the message lists the accepted names.
    """
    if isinstance(value, kind):
        return value
    key = str(value).strip().upper().replace("-", "_")
    try:
        return kind(key)
    except ValueError:
        names = ", ".join(m.value for m in kind)
        raise InvalidArgument(
            f"{option} must be one of {names}, not {value!r}",
            violations=[FieldViolation(option, f"unknown value {value!r}")],
        ) from None


def optional_enum(kind: type[E], value: E | str | None, option: str) -> E | None:
    """Like :func:`enum_value`, passing None through (None means "the server's default")."""
    return None if value is None else enum_value(kind, value, option)


def duration(value: Seconds | None, option: str) -> timedelta:
    """Returns ``value`` as a timedelta; numbers are seconds and None is zero.

    Negative values pass through: :func:`dsched.spec.validate_workflow` reports them with the
    field's proto path, which reads better than an error raised here.

    Raises:
        InvalidArgument: ``value`` is not a timedelta or a finite number.
    """
    if value is None:
        return timedelta(0)
    if isinstance(value, timedelta):
        return value
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidArgument(
            f"{option} must be a timedelta or a number of seconds, not {value!r}",
            violations=[FieldViolation(option, "not a duration")],
        )
    return timedelta(seconds=value)


def params(values: Mapping[str, object] | None) -> dict[str, str]:
    """Copies a parameter mapping with string values (parameters are text on the wire).

    Booleans become ``true``/``false`` (what a shell script tests for), None becomes ``""``.
    """
    out: dict[str, str] = {}
    for key, value in (values or {}).items():
        if isinstance(value, bool):
            out[str(key)] = "true" if value else "false"
        elif value is None:
            out[str(key)] = ""
        else:
            out[str(key)] = str(value)
    return out


def aware(value: datetime, option: str) -> datetime:
    """``value`` in UTC; a naive datetime is refused (which zone it meant cannot be guessed).

    Raises:
        InvalidArgument: ``value`` carries no time zone.
    """
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidArgument(
            f"{option} must carry a time zone (e.g. datetime(..., tzinfo=UTC))",
            violations=[FieldViolation(option, "a naive datetime")],
        )
    return value.astimezone(UTC)
