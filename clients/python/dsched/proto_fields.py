"""Proto field values both ways without raising: enum tables and the decoding of an option or a
duration a client sent (a bad value becomes a :class:`~dsched.errors.FieldViolation`). Shared by
:mod:`dsched.convert` and :mod:`dsched.convert_kinds`."""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum
from typing import Any, TypeVar

from google.protobuf import duration_pb2
from google.protobuf.internal.enum_type_wrapper import EnumTypeWrapper
from google.protobuf.message import Message

from dsched.errors import FieldViolation

E = TypeVar("E", bound=StrEnum)

# Duration limits of google.protobuf.Duration (about 10 000 years).
_MAX_DURATION_SECONDS = 315_576_000_000
_NANOS_PER_SECOND = 1_000_000_000


class EnumMap:
    """Number <-> member table for one StrEnum whose values are proto names without ``prefix``.

    The tables below are shared with the server's API layer; ``by_number`` and ``by_member`` are
    the two directions, :meth:`number` and :meth:`name` the forms message fields accept.
    """

    def __init__(self, members: type[StrEnum], wrapper: EnumTypeWrapper, prefix: str) -> None:
        self.prefix = prefix
        self.by_number: dict[int, StrEnum] = {wrapper.Value(prefix + m.value): m for m in members}

        self.by_member: dict[StrEnum, int] = {m: n for n, m in self.by_number.items()}

    def name(self, member: StrEnum) -> str:
        """The proto enum name (``PRIORITY_HIGH``); message constructors accept names."""
        return self.prefix + member.value

    def number(self, member: StrEnum) -> Any:
        """The proto enum number, typed Any so that it can be assigned to a message's enum field."""
        return self.by_member[member]


def option(
    table: EnumMap, kind: type[E], number: int, default: E, path: str, out: list[FieldViolation]
) -> E:
    member = table.by_number.get(number)
    if number == 0 or member is None:
        if number != 0:
            out.append(FieldViolation(path, f"unknown {table.prefix.rstrip('_')} value {number}"))
        return default
    return kind(member.value)


def duration(
    msg: Message,
    name: str,
    path: str,
    out: list[FieldViolation],
    default: timedelta = timedelta(0),
) -> timedelta:
    if not msg.HasField(name):
        return default
    value: duration_pb2.Duration = getattr(msg, name)
    seconds, nanos = value.seconds, value.nanos
    if abs(seconds) > _MAX_DURATION_SECONDS or abs(nanos) >= _NANOS_PER_SECOND:
        out.append(FieldViolation(path, "is not a valid duration (out of range)"))
    elif (seconds > 0 > nanos) or (seconds < 0 < nanos):
        out.append(
            FieldViolation(path, "is not a valid duration (seconds and nanos differ in sign)")
        )
    elif seconds < 0 or nanos < 0:
        out.append(FieldViolation(path, "must not be negative"))
    else:
        return timedelta(seconds=seconds, microseconds=nanos // 1000)
    return timedelta(0)
