"""Interfaces the pure core needs from the outside world."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol


class Clock(Protocol):
    """Wall-clock time (UTC, timezone-aware) and a monotonic clock for timers."""

    def now(self) -> datetime: ...

    def monotonic(self) -> float: ...
