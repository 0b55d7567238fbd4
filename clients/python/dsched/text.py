"""Checks of free text that every task kind shares: control characters, text that has no UTF-8 form,
and scripts (SHELL and PYTHON alike)."""

from __future__ import annotations

import re

from dsched.errors import FieldViolation

MAX_SCRIPT_BYTES = 256 * 1024

# C0 controls except tab, newline and carriage return, DEL, and the C1 controls (U+009B is CSI, a
# terminal escape on its own).
CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
# Lone surrogates (os.environ and os.fsdecode make them from undecodable bytes) have no UTF-8 form,
# so they could never travel in a proto string.
SURROGATE_RE = re.compile(r"[\ud800-\udfff]")
NOT_TEXT = "is not valid Unicode text (lone surrogate)"


def text_violation(path: str, value: str, limit: int) -> FieldViolation | None:
    """Checks free text: a length limit and no control characters other than tab and newlines."""
    if len(value) > limit:
        return FieldViolation(path, f"longer than {limit} characters")
    if CONTROL_RE.search(value):
        return FieldViolation(path, "contains control characters")
    if SURROGATE_RE.search(value):
        return FieldViolation(path, NOT_TEXT)
    return None


def script_violation(path: str, script: str) -> FieldViolation | None:
    """Checks a script: not blank, valid text, at most 256 KiB of UTF-8, no NUL character."""
    if not script.strip():
        return FieldViolation(path, "must not be empty")
    if SURROGATE_RE.search(script):
        return FieldViolation(path, NOT_TEXT)
    if len(script.encode()) > MAX_SCRIPT_BYTES:
        return FieldViolation(path, "is larger than 256 KiB")
    if "\x00" in script:
        return FieldViolation(path, "contains a NUL character")
    return None


def bounded_violation(path: str, value: str, limit_bytes: int, what: str) -> FieldViolation | None:
    """Checks text that may hold anything but NUL (a body, a header value): valid text of at most
    ``limit_bytes`` UTF-8 bytes; ``what`` names the limit in the message (e.g. "256 KiB")."""
    if SURROGATE_RE.search(value):
        return FieldViolation(path, NOT_TEXT)
    if len(value.encode()) > limit_bytes:
        return FieldViolation(path, f"is larger than {what}")
    if "\x00" in value:
        return FieldViolation(path, "contains a NUL character")
    return None
