"""The attempts a worker finished lately, so that a late or repeated dispatch of one is answered
ALREADY_ACCEPTED instead of running it twice.

A master sends an attempt again only while it does not know the attempt's result, which the
worker's terminal event tells it within seconds; the memory only has to cover that, plus a dispatch
delayed in the network. So it keeps an attempt for between ``window`` and twice ``window`` seconds
(two generations, swapped every ``window``: no timer and no time stamp per entry) and at most
``limit`` of them (beyond it the lowest task instance ids, the oldest attempts, go first), and an
idle worker's memory returns to what it was, whatever its history.

An entry is a task instance id and its attempt number (a task instance *is* one attempt), stored
as two machine integers in arrays sorted by id: 16 bytes, where a dict entry with its int key
object took about 80 (the scale bench's 50,000 runs within the window kept 4 MB that way, the
largest per-run share of the server's growth). Ids come from the database's sequence, so an
insertion lands at or near the end of the arrays; a lookup is a binary search.
"""

from __future__ import annotations

import time
from array import array
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, field

from dsched_server.protocol.attempt import AttemptKey

WINDOW_S = 3600.0


class _Generation:
    """Attempts sorted by task instance id, in two parallel arrays."""

    __slots__ = ("attempts", "ids")

    def __init__(self) -> None:
        self.ids = array("q")
        self.attempts = array("q")

    def __len__(self) -> int:
        return len(self.ids)

    def get(self, ti: int) -> int | None:
        i = bisect_left(self.ids, ti)
        return self.attempts[i] if i < len(self.ids) and self.ids[i] == ti else None

    def put(self, ti: int, attempt: int) -> None:
        i = bisect_left(self.ids, ti)
        if i < len(self.ids) and self.ids[i] == ti:
            self.attempts[i] = attempt
        else:
            self.ids.insert(i, ti)
            self.attempts.insert(i, attempt)

    def drop_lowest(self, count: int) -> None:
        del self.ids[:count], self.attempts[:count]


@dataclass(slots=True, kw_only=True, eq=False)
class FinishedAttempts:
    """At most ``limit`` attempts, each for ``window`` to twice ``window`` seconds of ``clock``."""

    limit: int
    window: float = WINDOW_S
    clock: Callable[[], float] = time.monotonic
    _swapped_at: float = field(init=False)
    _new: _Generation = field(init=False, default_factory=_Generation)
    _old: _Generation = field(init=False, default_factory=_Generation)

    def __post_init__(self) -> None:
        self._swapped_at = self.clock()

    def __len__(self) -> int:
        return len(self._new) + len(self._old)

    def __contains__(self, key: AttemptKey) -> bool:
        self._age()
        ti, attempt = key.task_instance_id, key.attempt
        return self._new.get(ti) == attempt or self._old.get(ti) == attempt

    def add(self, key: AttemptKey) -> None:
        self._age()
        self._new.put(key.task_instance_id, key.attempt)
        if len(self) > self.limit:  # one over at most: one entry was added
            (self._old if len(self._old) else self._new).drop_lowest(1)

    def _age(self) -> None:
        now = self.clock()
        if now - self._swapped_at < self.window:
            return
        # A generation older than two windows is gone whole; a younger one becomes the old one.
        self._old = self._new if now - self._swapped_at < 2 * self.window else _Generation()
        self._new = _Generation()
        self._swapped_at = now
