"""IANA time zone names as requests give them: checked once, then loaded by name.

Only names of the tz database are taken, spelled as it spells them (``Europe/Berlin``, ``UTC``):
the key is checked against a strict pattern before :class:`zoneinfo.ZoneInfo` looks it up, so a
request cannot name a file outside the database (``../``, absolute paths) or a POSIX TZ string.
"""

from __future__ import annotations

import re
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_+\-]*(/[A-Za-z0-9_+\-]+){0,2}")
MAX_LENGTH = 64


def zone_problem(name: str) -> str | None:
    """Why ``name`` is not a usable IANA time zone, or None if it is."""
    if len(name) > MAX_LENGTH or not _KEY.fullmatch(name):
        return f"{name[:MAX_LENGTH]!r} is not an IANA time zone name (e.g. Europe/Berlin, UTC)"
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return f"unknown time zone {name!r}"
    return None
