"""The worker's memory of finished attempts: kept for one to two windows, bounded in count, and
empty again once the worker has been idle for two windows."""

from __future__ import annotations

import tracemalloc

from dsched_server.protocol.attempt import AttemptKey
from dsched_worker.finished import FinishedAttempts


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_remembers_an_attempt_for_one_to_two_windows() -> None:
    clock = Clock()
    finished = FinishedAttempts(limit=100, window=10.0, clock=clock)
    finished.add(AttemptKey(1, 1))
    assert AttemptKey(1, 1) in finished
    assert AttemptKey(1, 2) not in finished and AttemptKey(2, 1) not in finished
    clock.now = 15.0  # one window on: still known (now in the old generation)
    assert AttemptKey(1, 1) in finished
    finished.add(AttemptKey(2, 1))
    clock.now = 26.0  # two windows after the first: it is forgotten, the second is not
    assert AttemptKey(1, 1) not in finished and AttemptKey(2, 1) in finished
    clock.now = 100.0  # idle for long: nothing is left
    assert AttemptKey(2, 1) not in finished and len(finished) == 0


def test_the_oldest_go_beyond_the_limit() -> None:
    clock = Clock()
    finished = FinishedAttempts(limit=3, window=10.0, clock=clock)
    for ti in range(1, 4):
        finished.add(AttemptKey(ti, 1))
    clock.now = 12.0
    finished.add(AttemptKey(4, 1))  # evicts 1, the oldest of the old generation
    finished.add(AttemptKey(5, 1))
    assert len(finished) == 3
    assert [AttemptKey(ti, 1) in finished for ti in range(1, 6)] == [False, False, True, True, True]


def test_memory_is_bounded_and_small_per_entry() -> None:
    """What the finished attempts hold, by tracemalloc (allocations, not time): about 16 bytes an
    entry, and no more once the limit is reached however many attempts finish after that (the
    scale bench's 50,000 runs in one window used to keep 80 bytes each)."""
    limit = 20_000
    finished = FinishedAttempts(limit=limit, clock=Clock())
    keys = [AttemptKey(1_000_000 + ti, 1) for ti in range(3 * limit)]  # ids past the small ints
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for key in keys[:limit]:
            finished.add(key)
        at_limit = tracemalloc.get_traced_memory()[0] - before
        for key in keys[limit:]:
            finished.add(key)
        after = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(finished) == limit
    assert at_limit / limit <= 20  # two 8-byte integers and the arrays' spare room
    assert after <= at_limit * 1.1  # the entries beyond the limit displaced older ones
    assert keys[-1] in finished and keys[0] not in finished
