"""Page sizes and page tokens of the List RPCs (keyset pagination: a token holds the sort key of the
last item of the previous page).

A token is self-describing: base64url (no padding) of the compact JSON
``{"v": 1, "l": <list>, "q": <query fingerprint>, "k": <key>}``. ``l`` names the listing that issued
it and ``q`` is a hash of that listing's filters, so a token replayed on another listing or with
other filters is refused instead of silently paging something else. Tokens are not secret and not
signed: a client that builds a well-formed token only chooses where a listing starts, which it may.

Decoding is strict and total: anything but a token this server could have issued for this listing
and query (too long, not base64url, not UTF-8 JSON, nested, another version, extra fields, a key of
the wrong type or outside its range) is :class:`InvalidArgument` with reason INVALID_PAGE_TOKEN and
the field ``page_token``, never another exception (``tests/unit/server/test_page_tokens.py`` fuzzes
it).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from dsched.errors import FieldViolation, InvalidArgument

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 1000
MAX_TOKEN_CHARS = 512  # an int key or a 256-byte string key fits with room to spare
VERSION = 1
INT64_MAX = 2**63 - 1

K = TypeVar("K", int, str)
_TOKEN_RE = re.compile(r"[A-Za-z0-9_-]+\Z")
_FIELDS = frozenset({"v", "l", "q", "k"})


def page_size(value: int) -> int:
    """Applies the default and the cap; negative sizes are invalid."""
    if value < 0:
        raise InvalidArgument(
            "page_size must not be negative",
            violations=[FieldViolation("page_size", "must not be negative")],
        )
    return min(value or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)


@dataclass(frozen=True, slots=True)
class KeyType(Generic[K]):
    """The sort key of one listing: its Python type and its valid range (ints) or length (str)."""

    type: type[K]
    low: int = 1
    high: int = INT64_MAX

    def valid(self, key: object) -> bool:
        if self.type is int:
            return type(key) is int and self.low <= key <= self.high
        return isinstance(key, str) and self.low <= len(key) <= self.high


ID_KEY = KeyType(int)  # database ids: positive BIGINT
VERSION_KEY = KeyType(int, high=2**31 - 1)  # workflow versions: positive int32
NAME_KEY = KeyType(str, high=256)  # project and workflow names


@dataclass(frozen=True, slots=True)
class Cursor(Generic[K]):
    """Where one request of one listing starts: ``after`` (None on the first page), how many items
    it may return at most, and how to make the token of the next page."""

    listing: str
    fingerprint: str
    key_type: KeyType[K]
    limit: int
    after: K | None

    def token(self, key: K) -> str:
        """The token of the page that starts after ``key``."""
        doc = {"v": VERSION, "l": self.listing, "q": self.fingerprint, "k": key}
        raw = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def cursor(
    listing: str,
    query: Mapping[str, object],
    key_type: KeyType[K],
    size: int,
    token: str,
) -> Cursor[K]:
    """Validates ``page_size`` and ``page_token`` of a request of ``listing`` filtered by
    ``query`` (JSON-able values); raises InvalidArgument for either."""
    limit = page_size(size)
    fingerprint = hashlib.sha256(
        json.dumps([listing, query], sort_keys=True, default=str).encode()
    ).hexdigest()[:16]
    after = decode(token, listing, fingerprint, key_type) if token else None
    return Cursor(listing, fingerprint, key_type, limit, after)


def decode(token: str, listing: str, fingerprint: str, key_type: KeyType[K]) -> K:
    """The key in ``token``; :class:`InvalidArgument` (INVALID_PAGE_TOKEN) unless ``token`` is one
    this server issued for ``listing`` with the same query."""
    if len(token) > MAX_TOKEN_CHARS or not _TOKEN_RE.match(token):
        raise _invalid("not a token returned by this server")
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        doc = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except (ValueError, binascii.Error, RecursionError, UnicodeDecodeError) as exc:
        raise _invalid("not a token returned by this server") from exc
    if not isinstance(doc, dict) or doc.keys() != _FIELDS or _not(doc["v"], VERSION):
        raise _invalid("not a token returned by this server")
    if _not(doc["l"], listing) or _not(doc["q"], fingerprint):
        raise _invalid("issued by another listing or for other filters; start again without it")
    key = doc["k"]
    if not key_type.valid(key):
        raise _invalid("not a token returned by this server")
    result: K = key
    return result


def _not(value: object, expected: int | str) -> bool:
    """Whether ``value`` differs from ``expected`` in type or value (``True == 1`` in Python)."""
    return type(value) is not type(expected) or value != expected


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _invalid(why: str) -> InvalidArgument:
    return InvalidArgument(
        f"invalid page_token: {why}",
        reason="INVALID_PAGE_TOKEN",
        violations=[FieldViolation("page_token", why)],
    )
