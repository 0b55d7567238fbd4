"""The worker's clock: a function returning the current time as an aware UTC datetime (tests pass
a fake, the app the wall clock)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

Clock = Callable[[], datetime]
