"""The attempts a worker finished lately, so that a late or repeated dispatch of one is answered
ALREADY_ACCEPTED instead of running it twice.

A master sends an attempt again only while it does not know the attempt's result, which the
worker's terminal event tells it within seconds; the memory only has to cover that, plus a dispatch
delayed in the network. So it keeps an attempt for between ``window`` and twice ``window`` seconds
(two generations, swapped every ``window``: no timer and no time stamp per entry) and at most
``limit`` of them, and an idle worker's memory returns to what it was, whatever its history. An
entry is a task instance id and its attempt number (a task instance *is* one attempt): about 80
bytes, where a key object and a log path took 380.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from dsched_server.protocol.attempt import AttemptKey

WINDOW_S = 3600.0


class FinishedAttempts:
    def __init__(
        self,
        *,
        limit: int,
        window: float = WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._limit = limit
        self._window = window
        self._clock = clock
        self._swapped_at = clock()
        self._new: dict[int, int] = {}  # task instance id -> attempt
        self._old: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._new) + len(self._old)

    def __contains__(self, key: AttemptKey) -> bool:
        self._age()
        ti, attempt = key.task_instance_id, key.attempt
        return self._new.get(ti) == attempt or self._old.get(ti) == attempt

    def add(self, key: AttemptKey) -> None:
        self._age()
        self._new[key.task_instance_id] = key.attempt
        while len(self) > self._limit:
            oldest = self._old or self._new  # dicts keep insertion order: the first is oldest
            del oldest[next(iter(oldest))]

    def _age(self) -> None:
        now = self._clock()
        if now - self._swapped_at < self._window:
            return
        # A generation older than two windows is gone whole; a younger one becomes the old one.
        self._old = self._new if now - self._swapped_at < 2 * self._window else {}
        self._new = {}
        self._swapped_at = now
