"""The next fire time of each schedule of a master's share, earliest first: what
``app/scheduler.py`` sleeps on."""

from __future__ import annotations

import heapq
from datetime import datetime


class FireQueue:
    """The next fire time of each schedule in a master's share, earliest first. An update or a
    removal leaves the old entry in the heap, ignored when it surfaces (its time no longer
    matches), so each change is O(log n)."""

    def __init__(self) -> None:
        self._heap: list[tuple[datetime, int]] = []
        self._next: dict[int, datetime] = {}

    def __len__(self) -> int:
        return len(self._next)

    def __contains__(self, schedule_id: int) -> bool:
        return schedule_id in self._next

    def set(self, schedule_id: int, when: datetime | None) -> None:
        if when is None:
            self._next.pop(schedule_id, None)
            return
        if self._next.get(schedule_id) == when:
            return
        self._next[schedule_id] = when
        heapq.heappush(self._heap, (when, schedule_id))

    def remove(self, schedule_id: int) -> None:
        self._next.pop(schedule_id, None)

    def clear(self) -> None:
        self._heap.clear()
        self._next.clear()

    def earliest(self) -> datetime | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: datetime) -> list[int]:
        """The schedules whose next fire time is at or before ``now`` (removed from the queue)."""
        out: list[int] = []
        while True:
            self._drop_stale()
            if not self._heap or self._heap[0][0] > now:
                return out
            _, schedule_id = heapq.heappop(self._heap)
            del self._next[schedule_id]
            out.append(schedule_id)

    def _drop_stale(self) -> None:
        while self._heap and self._next.get(self._heap[0][1]) != self._heap[0][0]:
            heapq.heappop(self._heap)
