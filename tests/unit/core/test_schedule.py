"""A schedule's due fires with a controllable clock: on time, catch-up after downtime, windows,
overlap, DST in New York and Berlin."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from dsched_server.core.cron import compile_cron
from dsched_server.core.schedule import (
    CatchUp,
    Overlap,
    OverlapAction,
    Window,
    due,
    next_fire,
    on_overlap,
)

UTC_ZONE = ZoneInfo("UTC")
BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
HOURLY = compile_cron("0 * * * *")
T0 = datetime(2026, 6, 1, tzinfo=UTC)
H = timedelta(hours=1)


def at(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


class TestOnTime:
    def test_a_fire_due_now_fires(self) -> None:
        got = due(HOURLY, UTC_ZONE, last=at(0), now=at(1), window=Window(), catch_up=CatchUp.NONE)
        assert (got.fire, got.skipped) == ((at(1),), 0)

    def test_a_little_late_is_still_on_time(self) -> None:
        now = at(1) + timedelta(seconds=59)
        got = due(HOURLY, UTC_ZONE, last=at(0), now=now, window=Window(), catch_up=CatchUp.NONE)
        assert got.fire == (at(1),)

    def test_nothing_due_before_the_fire_time(self) -> None:
        now = at(1) - timedelta(seconds=1)
        got = due(HOURLY, UTC_ZONE, last=at(0), now=now, window=Window(), catch_up=CatchUp.ALL)
        assert got.fire == ()

    def test_an_already_fired_time_is_not_due_again(self) -> None:
        got = due(HOURLY, UTC_ZONE, last=at(1), now=at(1), window=Window(), catch_up=CatchUp.ALL)
        assert got.fire == ()

    def test_a_new_schedule_fires_only_what_is_on_time(self) -> None:
        got = due(HOURLY, UTC_ZONE, last=None, now=at(5), window=Window(), catch_up=CatchUp.ALL)
        assert got.fire == (at(5),)


class TestCatchUp:
    """The master was down from just after 01:00 until 05:30: 02:00..05:00 were missed."""

    def look(self, policy: CatchUp, cap: int = 100) -> tuple[tuple[datetime, ...], int]:
        got = due(
            HOURLY, UTC_ZONE, last=at(1), now=at(5.5), window=Window(), catch_up=policy, cap=cap
        )
        return got.fire, got.skipped

    def test_none_skips_them(self) -> None:
        assert self.look(CatchUp.NONE) == ((), 4)

    def test_latest_fires_the_newest(self) -> None:
        assert self.look(CatchUp.LATEST) == ((at(5),), 3)

    def test_all_fires_them_oldest_first(self) -> None:
        assert self.look(CatchUp.ALL) == ((at(2), at(3), at(4), at(5)), 0)

    def test_all_is_capped_to_the_newest(self) -> None:
        assert self.look(CatchUp.ALL, cap=2) == ((at(4), at(5)), 1)  # at least one more

    def test_a_year_of_minutes_costs_the_cap(self) -> None:
        minutely = compile_cron("* * * * *")
        got = due(
            minutely,
            UTC_ZONE,
            last=T0,
            now=T0 + timedelta(days=365),
            window=Window(),
            catch_up=CatchUp.ALL,
            cap=10,
        )
        now = T0 + timedelta(days=365)
        missed = [t for t in got.fire if now - t > timedelta(seconds=60)]
        assert len(missed) == 10 and got.fire[-1] == now
        assert got.skipped >= 1


class TestWindow:
    def test_nothing_before_the_start(self) -> None:
        window = Window(start=at(3))
        got = due(HOURLY, UTC_ZONE, last=at(0), now=at(5), window=window, catch_up=CatchUp.ALL)
        assert got.fire == (at(3), at(4), at(5))

    def test_nothing_after_the_end(self) -> None:
        window = Window(end=at(2))
        got = due(HOURLY, UTC_ZONE, last=at(0), now=at(5), window=window, catch_up=CatchUp.ALL)
        assert got.fire == (at(1), at(2))

    def test_next_fire_respects_both_ends(self) -> None:
        assert next_fire(HOURLY, UTC_ZONE, at(0), Window(start=at(3))) == at(3)
        assert next_fire(HOURLY, UTC_ZONE, at(2), Window(end=at(2))) is None
        assert next_fire(HOURLY, UTC_ZONE, at(1.5), Window()) == at(2)


class TestDaylightSaving:
    def test_spring_forward_in_berlin_skips_the_missing_fire(self) -> None:
        daily = compile_cron("30 2 * * *")
        before = datetime(2026, 3, 28, 2, 30, tzinfo=BERLIN)
        nxt = next_fire(daily, BERLIN, before, Window())
        assert nxt is not None
        assert nxt.astimezone(BERLIN) == datetime(2026, 3, 30, 2, 30, tzinfo=BERLIN)

    def test_spring_forward_in_new_york_catch_up_all_finds_no_missing_fire(self) -> None:
        daily = compile_cron("30 2 * * *")
        last = datetime(2026, 3, 7, 2, 30, tzinfo=NEW_YORK)
        now = datetime(2026, 3, 9, 3, 0, tzinfo=NEW_YORK)
        got = due(daily, NEW_YORK, last=last, now=now, window=Window(), catch_up=CatchUp.ALL)
        assert [t.astimezone(NEW_YORK).day for t in got.fire] == [9]  # none on the 8th

    def test_fall_back_in_new_york_fires_once(self) -> None:
        every_half_hour = compile_cron("*/30 * * * *")
        last = datetime(2026, 11, 1, 0, 30, tzinfo=NEW_YORK)
        now = datetime(2026, 11, 1, 7, 0, tzinfo=UTC)  # 02:00 EST, after both 01:xx hours
        got = due(
            every_half_hour, NEW_YORK, last=last, now=now, window=Window(), catch_up=CatchUp.ALL
        )
        local = [t.astimezone(NEW_YORK).strftime("%H:%M %Z") for t in got.fire]
        assert local == ["01:00 EDT", "01:30 EDT", "02:00 EST"]

    def test_fall_back_in_berlin_fires_once(self) -> None:
        daily = compile_cron("30 2 * * *")
        fires = []
        after = datetime(2026, 10, 24, 12, tzinfo=BERLIN)
        for _ in range(3):
            nxt = next_fire(daily, BERLIN, after, Window())
            assert nxt is not None
            fires.append(nxt)
            after = nxt
        assert [t.astimezone(BERLIN).strftime("%d %H:%M %Z") for t in fires] == [
            "25 02:30 CEST",
            "26 02:30 CET",
            "27 02:30 CET",
        ]


@pytest.mark.parametrize(
    ("policy", "running", "action"),
    [
        (Overlap.RUN, True, OverlapAction.FIRE),
        (Overlap.SKIP, True, OverlapAction.SKIP),
        (Overlap.QUEUE, True, OverlapAction.QUEUE),
        (Overlap.SKIP, False, OverlapAction.FIRE),
        (Overlap.QUEUE, False, OverlapAction.FIRE),
    ],
)
def test_overlap(policy: Overlap, running: bool, action: OverlapAction) -> None:
    assert on_overlap(policy, running) is action
