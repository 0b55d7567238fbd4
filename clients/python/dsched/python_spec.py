"""The PYTHON task as a plain value, and its validation (``PythonTask`` in python_task.proto)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from dsched.errors import FieldViolation
from dsched.text import NOT_TEXT, SURROGATE_RE, script_violation

MAX_INTERPRETER_LENGTH = 256
# An absolute path or a command name: no whitespace or control characters (it is one argv entry,
# and a relative path would name a file in the attempt's fresh working directory).
_INTERPRETER_RE = re.compile(r"[^\s\x00-\x1f\x7f]+\Z")


@dataclass(frozen=True, slots=True, kw_only=True)
class PythonSpec:
    """A Python script and the interpreter that runs it ("" for the worker's default)."""

    script: str
    interpreter: str = ""


def python_violations(path: str, spec: PythonSpec) -> list[FieldViolation]:
    """The violations of a PYTHON task at ``path`` (e.g. ``workflow.tasks[0].python``)."""
    out = [script_violation(f"{path}.script", spec.script)]
    if spec.interpreter:
        out.append(interpreter_violation(f"{path}.interpreter", spec.interpreter))
    return [v for v in out if v is not None]


def interpreter_violation(path: str, interpreter: str) -> FieldViolation | None:
    """An interpreter is an absolute path or a command name (see :data:`_INTERPRETER_RE`)."""
    if SURROGATE_RE.search(interpreter):
        return FieldViolation(path, NOT_TEXT)
    if len(interpreter) > MAX_INTERPRETER_LENGTH:
        return FieldViolation(path, f"longer than {MAX_INTERPRETER_LENGTH} characters")
    if not _INTERPRETER_RE.match(interpreter):
        return FieldViolation(path, "must not contain whitespace or control characters")
    if "/" in interpreter and not interpreter.startswith("/"):
        return FieldViolation(path, "must be an absolute path or a command name")
    return None
