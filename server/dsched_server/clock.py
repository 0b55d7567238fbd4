"""The real clock (the core only sees the :class:`~dsched_server.core.ports.Clock` protocol)."""

from __future__ import annotations

import time
from datetime import UTC, datetime


class SystemClock:
    """UTC wall clock plus ``time.monotonic``."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()
