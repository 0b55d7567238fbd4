"""Opaque page tokens (keyset pagination: the token holds the last key of the previous page)."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from dsched.errors import FieldViolation, InvalidArgument

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 1000


def page_size(value: int) -> int:
    """Applies the default and the cap; negative sizes are invalid."""
    if value < 0:
        raise InvalidArgument(
            "page_size must not be negative",
            violations=[FieldViolation("page_size", "must not be negative")],
        )
    return min(value or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)


def encode(key: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps({"k": key}).encode()).decode()


def decode(token: str) -> Any:
    """Returns the key in ``token`` (None for an empty token)."""
    if not token:
        return None
    try:
        return json.loads(base64.urlsafe_b64decode(token.encode()))["k"]
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise _malformed() from exc


def decode_int(token: str) -> int | None:
    """The integer key in ``token`` (None for an empty token); a forged key is InvalidArgument."""
    key = decode(token)
    if key is not None and (not isinstance(key, int) or isinstance(key, bool)):
        raise _malformed()
    return key


def decode_str(token: str) -> str | None:
    """The string key in ``token`` (None for an empty token); a forged key is InvalidArgument."""
    key = decode(token)
    if key is not None and not isinstance(key, str):
        raise _malformed()
    return key


def _malformed() -> InvalidArgument:
    return InvalidArgument(
        "malformed page_token",
        violations=[FieldViolation("page_token", "not a token returned by this server")],
    )
