"""The fire queue: the next fire time of each schedule of a share, earliest first."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from dsched_server.core.fire_queue import FireQueue


def at(hour: int) -> datetime:
    return datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=hour)


class TestFireQueue:
    def test_earliest_first_and_updates_replace(self) -> None:
        q = FireQueue()
        q.set(1, at(3))
        q.set(2, at(1))
        q.set(3, at(2))
        q.set(2, at(5))  # moved later
        q.remove(3)
        assert q.earliest() == at(3)
        assert q.pop_due(at(4)) == [1]
        assert q.pop_due(at(4)) == []
        assert q.pop_due(at(5)) == [2]
        assert len(q) == 0 and q.earliest() is None

    def test_set_none_removes(self) -> None:
        q = FireQueue()
        q.set(1, at(1))
        q.set(1, None)
        assert 1 not in q and q.pop_due(at(9)) == []
