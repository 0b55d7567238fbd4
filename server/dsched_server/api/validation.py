"""Request checks shared by the API servicers. Each raises InvalidArgument with field violations
(nothing has been written when they run)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from enum import Enum, StrEnum
from typing import Any, TypeVar

from google.protobuf import timestamp_pb2
from google.protobuf.message import Message

from dsched.convert import FAILURE_STRATEGY, PRIORITY, EnumMap
from dsched.errors import FieldViolation, InvalidArgument
from dsched.names import name_violation, reason_for, worker_group_violation
from dsched.options import FailureStrategy, Priority
from dsched.spec import (
    _CONTROL_RE,
    MAX_TASKS,
    params_size_violation,
    params_violations,
)
from dsched.templates import template_violations
from dsched_server.core.zones import zone_problem

E = TypeVar("E", bound=StrEnum)
N = TypeVar("N", bound=Enum)
MAX_REQUEST_ID = 128
_MAX_SECONDS = 253_402_300_799  # 9999-12-31T23:59:59Z


class Checks:
    """Collects violations of one request; :meth:`raise_if_any` raises them together."""

    def __init__(self) -> None:
        self.violations: list[FieldViolation] = []
        self.too_large = False  # a size limit was hit: reason REQUEST_TOO_LARGE

    @staticmethod
    def violation(field: str, description: str) -> FieldViolation:
        return FieldViolation(field, description)

    def add(self, field: str, description: str) -> None:
        self.violations.append(FieldViolation(field, description))

    def name(self, field: str, value: str, what: str = "name") -> None:
        violation = name_violation(field, value, what)
        if violation is not None:
            self.violations.append(violation)

    def optional_name(self, field: str, value: str, what: str = "name") -> None:
        if value:
            self.name(field, value, what)

    def optional_worker_group(self, field: str, value: str) -> None:
        violation = worker_group_violation(field, value) if value else None
        if violation is not None:
            self.violations.append(violation)

    def positive_id(self, field: str, value: int) -> None:
        if value <= 0:
            self.add(field, "must be a positive id")

    def request_id(self, value: str) -> None:
        if len(value) > MAX_REQUEST_ID:
            self.add("request_id", f"longer than {MAX_REQUEST_ID} characters")
        elif _CONTROL_RE.search(value):
            self.add("request_id", "contains control characters")

    def params(self, field: str, value: Mapping[str, str]) -> None:
        """Checks a request's parameter map: names, values and the total size (reason
        REQUEST_TOO_LARGE)."""
        self.violations.extend(params_violations(field, value))
        too_large = params_size_violation(field, [value])
        if too_large is not None:
            self.violations.append(too_large)
            self.too_large = True

    def templates(self, field: str, value: Mapping[str, str]) -> None:
        """Checks the ``$[...]`` time expressions and ``${system....}`` references in the values
        of a parameter map (README: Time parameters; a definition's are checked by
        :func:`dsched.spec.check_workflow`), so that a value that cannot be expanded is refused
        here rather than failing a task later."""
        self.violations.extend(template_violations(field, value))

    def time_zone(self, field: str, value: str) -> str:
        """An IANA zone name; empty means UTC."""
        if not value:
            return "UTC"
        problem = zone_problem(value)
        if problem is not None:
            self.add(field, problem)
        return value

    def instant(self, field: str, value: timestamp_pb2.Timestamp) -> datetime | None:
        """A timestamp between 1970 and 9999 (the range every backend stores)."""
        if not (0 <= value.seconds <= _MAX_SECONDS and 0 <= value.nanos < 10**9):
            self.add(field, "must be a time between 1970-01-01 and 9999-12-31 UTC")
            return None
        return value.ToDatetime(tzinfo=UTC)

    def optional_instant(self, field: str, msg: Message, name: str) -> datetime | None:
        """The timestamp field ``name`` of ``msg`` if it is set (see :meth:`instant`)."""
        return self.instant(field, getattr(msg, name)) if msg.HasField(name) else None

    def by_name(
        self, kind: type[N], wrapper: Any, prefix: str, field: str, number: int, default: N
    ) -> N:
        """A proto enum number as the member of ``kind`` named like its value after ``prefix``
        (0: ``default``); an unknown number is a violation."""
        if number == 0:
            return default
        try:
            return kind[wrapper.Name(number).removeprefix(prefix)]
        except (ValueError, KeyError):
            self.add(field, f"unknown value {number}")
            return default

    def task_names(self, field: str, names: Iterable[str]) -> None:
        seen: set[str] = set()
        for i, name in enumerate(names):
            if i >= MAX_TASKS:
                self.add(field, f"more than {MAX_TASKS} entries")
                return
            self.name(f"{field}[{i}]", name, "task name")
            if name in seen:
                self.add(f"{field}[{i}]", f"{name!r} listed twice")
            seen.add(name)

    def enum(self, table: EnumMap, kind: type[E], field: str, number: int, default: E) -> E:
        """Decodes an optional enum field; an unknown number is a violation."""
        if number == 0:
            return default
        member = table.by_number.get(number)
        if member is None:
            self.add(field, f"unknown value {number}")
            return default
        return kind(member.value)

    def failure_strategy(self, field: str, number: int) -> FailureStrategy:
        """A run's failure strategy; unset is CONTINUE (every way to start runs shares it)."""
        return self.enum(FAILURE_STRATEGY, FailureStrategy, field, number, FailureStrategy.CONTINUE)

    def priority(self, field: str, number: int) -> Priority:
        """A run's priority; unset is MEDIUM (every way to start runs shares it)."""
        return self.enum(PRIORITY, Priority, field, number, Priority.MEDIUM)

    def raise_if_any(self, message: str = "invalid request") -> None:
        if self.violations:
            raise InvalidArgument(
                message,
                reason=reason_for(
                    self.violations,
                    "REQUEST_TOO_LARGE" if self.too_large else "INVALID_ARGUMENT",
                ),
                violations=self.violations,
            )


def check_id_request(target_id: int, request_id: str) -> None:
    """Checks a mutating request that names one object by ``id`` (an instance, a task instance)
    and carries a ``request_id``."""
    checks = Checks()
    checks.positive_id("id", target_id)
    checks.request_id(request_id)
    checks.raise_if_any()


def check_name_request(name: str, what: str, request_id: str) -> None:
    """Checks a mutating request that names one object by ``name`` (``what``: its kind, as the
    violation says it: "project name", "datasource name") and carries a ``request_id``."""
    checks = Checks()
    checks.name("name", name, what)
    checks.request_id(request_id)
    checks.raise_if_any()
