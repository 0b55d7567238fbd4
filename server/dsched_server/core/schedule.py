"""What a schedule fires, when: the pure decisions behind ``engine/scheduler.py``.

A schedule's fire times come from its cron in its time zone (``core/cron.py``), within its start
and end. At each look (:func:`due`) the fire times since the last one it fired are split into
*on time* (no later than :data:`MISFIRE_GRACE` ago: always fired) and *missed* (the master that
owned the schedule was down, or the whole cluster was). What happens to missed ones is the
schedule's catch-up policy:

* ``NONE``: skipped;
* ``LATEST``: only the newest is fired;
* ``ALL``: all are fired, oldest first, at most ``cap`` of them (the newest ``cap``).

When a fire comes while the schedule's previous run is still going, its overlap policy says what
happens (:func:`on_overlap`): ``RUN`` anyway, ``SKIP`` the fire, or ``QUEUE`` it until the run ends.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from dsched_server.core.cron import Cron
from dsched_server.core.records import RunOptions

MISFIRE_GRACE = timedelta(seconds=60)
DEFAULT_CATCH_UP_CAP = 100
MAX_CATCH_UP_CAP = 1000


class CatchUp(enum.Enum):
    NONE = "none"
    LATEST = "latest"
    ALL = "all"


class Overlap(enum.Enum):
    RUN = "run"
    SKIP = "skip"
    QUEUE = "queue"


@dataclass(frozen=True, slots=True)
class Window:
    start: datetime | None = None  # no fire before
    end: datetime | None = None  # no fire after

    def holds(self, when: datetime) -> bool:
        return (self.start is None or when >= self.start) and (self.end is None or when <= self.end)


@dataclass(frozen=True, slots=True)
class Due:
    fire: tuple[datetime, ...]  # to fire now, oldest first
    skipped: int  # missed fire times not fired (at least this many: the look-back is bounded)


def next_fire(cron: Cron, zone: ZoneInfo, after: datetime, window: Window) -> datetime | None:
    """The first fire time after ``after`` within the window, or None (ended, or never)."""
    start = after
    if window.start is not None and window.start > after:
        start = window.start - timedelta(microseconds=1)
    for when in cron.fire_times(start, zone):
        if window.end is not None and when > window.end:
            return None
        return when
    return None


def due(
    cron: Cron,
    zone: ZoneInfo,
    *,
    last: datetime | None,
    now: datetime,
    window: Window,
    catch_up: CatchUp,
    cap: int = DEFAULT_CATCH_UP_CAP,
    grace: timedelta = MISFIRE_GRACE,
    times: FireTimes | None = None,
) -> Due:
    """The fire times after ``last`` (None: only on-time ones count) up to ``now`` to fire now.
    Looks back at most ``cap`` + 1 fire times (a schedule down for a year costs no more).
    ``times``: the fire times already walked at ``now`` by other schedules of a batch."""
    floor = last if last is not None else now - grace - timedelta(microseconds=1)
    if window.start is not None:
        floor = max(floor, window.start - timedelta(microseconds=1))
    top = now if window.end is None else min(now, window.end)
    on_time: list[datetime] = []
    missed: list[datetime] = []  # newest first
    walk = times.before(cron, zone, top) if times is not None else cron.fires_before(top, zone)
    for when in walk:
        if when <= floor:
            break
        (on_time if now - when <= grace else missed).append(when)
        if len(missed) > cap:
            break  # more missed than the cap: enough to know (skipped is then a lower bound)
    if catch_up is CatchUp.NONE:
        chosen: list[datetime] = []
    elif catch_up is CatchUp.LATEST:
        chosen = missed[:1]
    else:
        chosen = missed[:cap]
    return Due(fire=tuple(sorted(chosen + on_time)), skipped=len(missed) - len(chosen))


class FireTimes:
    """The fire times around one instant ``now``, walked once for all the schedules of a batch
    that share a cron and a zone: setting croniter up and walking it cost more than the rest of
    firing a schedule, and a cron storm is thousands of schedules on a few crons."""

    def __init__(self, now: datetime) -> None:
        self.now = now
        self._before: dict[tuple[Cron, ZoneInfo, datetime], _Walk] = {}
        self._next: dict[tuple[Cron, ZoneInfo, Window], datetime | None] = {}

    def before(self, cron: Cron, zone: ZoneInfo, top: datetime) -> Iterable[datetime]:
        """``cron.fires_before(top, zone)``, newest first, walked as far as a reader went."""
        key = (cron, zone, top)
        walk = self._before.get(key)
        if walk is None:
            walk = self._before[key] = _Walk(cron.fires_before(top, zone))
        return walk

    def latest(self, cron: Cron, zone: ZoneInfo) -> datetime | None:
        """The newest fire time at or before ``now``."""
        return next(iter(self.before(cron, zone, self.now)), None)

    def upcoming(self, cron: Cron, zone: ZoneInfo, window: Window) -> datetime | None:
        """:func:`next_fire` after ``now``."""
        key = (cron, zone, window)
        if key not in self._next:
            self._next[key] = next_fire(cron, zone, self.now, window)
        return self._next[key]


class _Walk:
    """An iterator's items, read from it once and replayed to every later reader."""

    def __init__(self, source: Iterator[datetime]) -> None:
        self._source = source
        self._seen: list[datetime] = []

    def __iter__(self) -> Iterator[datetime]:
        i = 0
        while True:
            if i == len(self._seen):
                item = next(self._source, None)
                if item is None:
                    return
                self._seen.append(item)
            yield self._seen[i]
            i += 1


class OverlapAction(enum.Enum):
    FIRE = "fire"
    SKIP = "skip"
    QUEUE = "queue"


def on_overlap(policy: Overlap, previous_running: bool) -> OverlapAction:
    if not previous_running or policy is Overlap.RUN:
        return OverlapAction.FIRE
    return OverlapAction.SKIP if policy is Overlap.SKIP else OverlapAction.QUEUE


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleSpec:
    """What a client sets on a schedule."""

    cron: str
    time_zone: str = "UTC"
    window: Window = field(default_factory=Window)
    catch_up: CatchUp = CatchUp.LATEST
    catch_up_cap: int = DEFAULT_CATCH_UP_CAP
    overlap: Overlap = Overlap.RUN
    run_options: RunOptions = field(default_factory=RunOptions)


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleRecord:
    id: int
    project: str
    workflow: str
    workflow_code: int
    spec: ScheduleSpec
    online: bool
    next_fire_time: datetime | None
    last_fire_time: datetime | None
    create_time: datetime
    update_time: datetime
