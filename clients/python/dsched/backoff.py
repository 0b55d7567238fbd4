"""Retry timing as one small value object (exponential back-off with jitter and an optional
deadline), for the SDK (:class:`dsched.streams.Reconnect`) and the servers alike.

Call sites iterate over :meth:`Backoff.delays` instead of writing their own retry loops::

    for delay in backoff.delays():
        try:
            return await call()
        except Unavailable:
            await asyncio.sleep(delay)
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class Backoff:
    """Delays of ``initial * multiplier**n`` capped at ``maximum``, each spread by ``±jitter``.

    ``deadline`` bounds the sum of the delays (None: unbounded); ``attempts`` bounds their number.
    """

    initial: float = 0.05
    maximum: float = 5.0
    multiplier: float = 2.0
    jitter: float = 0.2
    deadline: float | None = None
    attempts: int | None = None

    def delays(self, rng: random.Random | None = None) -> Iterator[float]:
        """Yields the successive delays in seconds; stops at the deadline or attempt limit."""
        # The module's generator unless one is given: seeding a new one reads the OS's entropy
        # (11 us), and the servers start a retry loop per dispatch batch.
        draw = rng.random if rng is not None else random.random
        base = min(self.initial, self.maximum)
        total = 0.0
        count = 0
        while self.attempts is None or count < self.attempts:
            delay = base * (1 + self.jitter * (2 * draw() - 1))
            last = False
            if self.deadline is not None:
                if total >= self.deadline:
                    return
                if delay >= self.deadline - total:
                    # Clipped to land on the deadline, and the last one: ``total`` may come out a
                    # hair under the deadline in floating point, which must not buy another delay.
                    delay, last = self.deadline - total, True
            total += delay
            count += 1
            yield delay
            if last:
                return
            base = min(base * self.multiplier, self.maximum)
