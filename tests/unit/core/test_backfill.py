"""The backfill's pure decisions: which dates, in what order, how many at a time, when it ends."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import ClassVar

import pytest

from dsched_server.core.backfill import (
    BACKFILL_TRANSITIONS,
    BackfillRequestError,
    BackfillState,
    DateRun,
    DateState,
    OnFailure,
    Options,
    Order,
    PastOutcome,
    Reprocess,
    after_failure,
    backfill_transition_allowed,
    count,
    expand_range,
    explicit_dates,
    on_cancel,
    progress,
    progress_counts,
    recount,
    select_dates,
    settled_by_counts,
    settled_state,
    to_start,
)

DAY = timedelta(days=1)
D0 = datetime(2026, 1, 1, 2, 0, tzinfo=UTC)


def daily(start: datetime = D0) -> Iterator[datetime]:
    """An endless daily cron, as core/cron yields fire times."""
    return (start + n * DAY for n in itertools.count())


def runs(*states: DateState) -> list[DateRun]:
    return [DateRun(position=i, when=D0 + i * DAY, state=s) for i, s in enumerate(states)]


P, R, S, F, K = (
    DateState.PENDING,
    DateState.RUNNING,
    DateState.SUCCEEDED,
    DateState.FAILED,
    DateState.SKIPPED,
)


class TestExpandRange:
    def test_both_ends_are_inclusive(self) -> None:
        dates = expand_range(daily(), start=D0, end=D0 + 4 * DAY)
        assert dates == [D0 + n * DAY for n in range(5)]

    def test_fire_times_before_the_start_are_ignored(self) -> None:
        dates = expand_range(daily(D0 - 3 * DAY), start=D0, end=D0 + DAY)
        assert dates == [D0, D0 + DAY]

    def test_end_before_start_names_the_end(self) -> None:
        with pytest.raises(BackfillRequestError) as caught:
            expand_range(daily(), start=D0, end=D0 - DAY)
        assert caught.value.field == "end"

    def test_a_range_without_a_fire_time_is_refused(self) -> None:
        with pytest.raises(BackfillRequestError) as caught:
            expand_range(daily(), start=D0 + timedelta(hours=1), end=D0 + timedelta(hours=2))
        assert caught.value.field == "start"

    def test_over_the_cap_is_refused_after_reading_cap_plus_one(self) -> None:
        read: list[datetime] = []

        def minutely() -> Iterator[datetime]:
            for n in itertools.count():
                read.append(D0 + n * timedelta(minutes=1))
                yield read[-1]

        with pytest.raises(BackfillRequestError, match="more than 1000"):
            # 100 years of a minutely cron
            expand_range(minutely(), start=D0, end=D0 + 36500 * DAY)
        assert len(read) == 1001

    def test_exactly_the_cap_is_allowed(self) -> None:
        assert len(expand_range(daily(), start=D0, end=D0 + 9 * DAY, cap=10)) == 10


class TestExplicitDates:
    def test_deduplicated_and_ascending(self) -> None:
        given = [D0 + 2 * DAY, D0, D0 + 2 * DAY, D0 + DAY]
        assert explicit_dates(given) == [D0, D0 + DAY, D0 + 2 * DAY]

    def test_empty_is_refused(self) -> None:
        with pytest.raises(BackfillRequestError) as caught:
            explicit_dates([])
        assert caught.value.field == "dates"

    def test_duplicates_do_not_hide_dates_past_the_cap(self) -> None:
        given = [D0] * 5 + [D0 + n * DAY for n in range(1, 4)]
        with pytest.raises(BackfillRequestError):
            explicit_dates(given, cap=3)

    def test_many_duplicates_of_few_dates_pass(self) -> None:
        assert explicit_dates([D0] * 5000, cap=3) == [D0]


class TestOptions:
    @pytest.mark.parametrize("parallelism", [0, -1, 33])
    def test_parallelism_out_of_bounds(self, parallelism: int) -> None:
        with pytest.raises(BackfillRequestError) as caught:
            Options(parallelism=parallelism).check()
        assert caught.value.field == "parallelism"

    @pytest.mark.parametrize("parallelism", [1, 32])
    def test_parallelism_bounds_are_allowed(self, parallelism: int) -> None:
        Options(parallelism=parallelism).check()


class TestSelectDates:
    dates: ClassVar[list[datetime]] = [D0 + n * DAY for n in range(4)]
    past: ClassVar[dict[datetime, PastOutcome]] = {
        D0: PastOutcome.SUCCEEDED,
        D0 + DAY: PastOutcome.UNSUCCESSFUL,
        D0 + 2 * DAY: PastOutcome.RUNNING,
    }

    def test_all_skips_only_a_date_running_now(self) -> None:
        chosen = select_dates(self.dates, self.past, Options())
        assert chosen == [D0, D0 + DAY, D0 + 3 * DAY]

    def test_failed_only(self) -> None:
        assert select_dates(self.dates, self.past, Options(reprocess=Reprocess.FAILED)) == [
            D0 + DAY
        ]

    def test_missing_only(self) -> None:
        assert select_dates(self.dates, self.past, Options(reprocess=Reprocess.MISSING)) == [
            D0 + 3 * DAY
        ]

    def test_descending(self) -> None:
        chosen = select_dates(self.dates, {}, Options(order=Order.DESCENDING))
        assert chosen == list(reversed(self.dates))


class TestToStart:
    def test_serial_starts_one_in_order(self) -> None:
        dates = runs(P, P, P)
        assert [d.position for d in to_start(BackfillState.RUNNING, dates, Options())] == [0]

    def test_serial_waits_while_one_runs(self) -> None:
        assert to_start(BackfillState.RUNNING, runs(S, R, P), Options()) == []

    def test_serial_goes_on_after_a_failure_by_default(self) -> None:
        started = to_start(BackfillState.RUNNING, runs(S, F, P), Options())
        assert [d.position for d in started] == [2]

    def test_parallel_fills_free_slots_only(self) -> None:
        dates = runs(R, S, R, P, P, P, P)
        started = to_start(BackfillState.RUNNING, dates, Options(parallelism=3))
        assert [d.position for d in started] == [3]

    def test_parallel_is_n_at_a_time_not_chunks(self) -> None:
        dates = runs(*([P] * 10))
        started = to_start(BackfillState.RUNNING, dates, Options(parallelism=3))
        assert [d.position for d in started] == [0, 1, 2]

    def test_position_orders_not_the_list(self) -> None:
        dates = list(reversed(runs(P, P, P)))
        started = to_start(BackfillState.RUNNING, dates, Options(parallelism=2))
        assert [d.position for d in started] == [0, 1]

    @pytest.mark.parametrize("state", [s for s in BackfillState if s is not BackfillState.RUNNING])
    def test_nothing_starts_unless_running(self, state: BackfillState) -> None:
        assert to_start(state, runs(P, P), Options(parallelism=2)) == []

    def test_never_more_in_flight_than_parallelism(self) -> None:
        """Drives a whole backfill step by step: at no step are more than 3 dates running."""
        options = Options(parallelism=3)
        dates = runs(*([P] * 20))
        peak = 0
        step = 0
        while any(d.state is not S for d in dates):
            for d in to_start(BackfillState.RUNNING, dates, options):
                dates[d.position] = DateRun(d.position, d.when, R)
            running = [d for d in dates if d.state is R]
            peak = max(peak, len(running))
            finished = running[step % len(running)]  # not always the oldest
            dates[finished.position] = DateRun(finished.position, finished.when, S)
            step += 1
        assert peak == 3
        assert step == 20


class TestFailureAndCancel:
    def test_continue_skips_nothing(self) -> None:
        assert after_failure(runs(F, P, P), Options()) == []

    def test_stop_skips_the_pending(self) -> None:
        skipped = after_failure(runs(F, R, P, P), Options(on_failure=OnFailure.STOP))
        assert [d.position for d in skipped] == [2, 3]

    def test_cancel_skips_the_pending_not_the_running(self) -> None:
        assert [d.position for d in on_cancel(runs(S, R, P, P))] == [2, 3]


class TestSettledState:
    def test_work_remaining_keeps_the_state(self) -> None:
        assert settled_state(BackfillState.RUNNING, runs(S, R)) is BackfillState.RUNNING
        assert settled_state(BackfillState.PAUSED, runs(S, P)) is BackfillState.PAUSED

    def test_all_succeeded(self) -> None:
        assert settled_state(BackfillState.RUNNING, runs(S, S)) is BackfillState.SUCCEEDED

    def test_a_failure_or_a_skip_fails_it(self) -> None:
        assert settled_state(BackfillState.RUNNING, runs(S, F)) is BackfillState.FAILED
        assert settled_state(BackfillState.RUNNING, runs(F, K)) is BackfillState.FAILED

    def test_a_finished_state_stays(self) -> None:
        assert settled_state(BackfillState.CANCELLED, runs(S, K)) is BackfillState.CANCELLED

    def test_a_paused_backfill_whose_last_run_ended_settles(self) -> None:
        assert settled_state(BackfillState.PAUSED, runs(S, S)) is BackfillState.SUCCEEDED


class TestCounts:
    """An advance reads only the dates that can change and keeps the counts on the backfill's row
    from the changes; the state it settles from them must be the one all the dates would give."""

    def test_settled_by_counts_agrees_with_the_dates(self) -> None:
        cases = [(S, R), (S, P), (S, S), (S, F), (F, K), (S, K), (S,), (P,)]
        for states in cases:
            for state in BackfillState:
                dates = runs(*states)
                assert settled_by_counts(state, count(dates)) is settled_state(state, dates)

    def test_recount_follows_the_changes(self) -> None:
        dates = runs(S, R, R, P, P)
        after = [replace(dates[1], state=S), replace(dates[2], state=F), replace(dates[3], state=R)]
        counts = recount(count(dates), [dates[1], dates[2], dates[3]], after)
        assert counts == count([dates[0], *after, dates[4]])
        assert counts == {P: 1, R: 1, S: 2, F: 1, K: 0}

    def test_recount_refuses_changes_the_counts_do_not_hold(self) -> None:
        with pytest.raises(ValueError, match="do not hold"):
            recount(count(runs(S)), runs(R), [replace(runs(R)[0], state=S)])

    def test_progress_counts_round_trip(self) -> None:
        dates = runs(S, R, F, P, K, P)
        assert progress_counts(progress(dates, [], Options())) == count(dates)


class TestTransitions:
    def test_finished_states_are_final(self) -> None:
        for state in (BackfillState.SUCCEEDED, BackfillState.FAILED, BackfillState.CANCELLED):
            assert BACKFILL_TRANSITIONS[state] == frozenset()

    def test_pause_resume_cancel(self) -> None:
        assert backfill_transition_allowed(BackfillState.RUNNING, BackfillState.PAUSED)
        assert backfill_transition_allowed(BackfillState.PAUSED, BackfillState.RUNNING)
        assert backfill_transition_allowed(BackfillState.PAUSED, BackfillState.CANCELLED)
        assert not backfill_transition_allowed(BackfillState.CANCELLED, BackfillState.RUNNING)
        assert not backfill_transition_allowed(BackfillState.PAUSED, BackfillState.SUCCEEDED)


class TestProgress:
    def test_counts(self) -> None:
        p = progress(runs(S, S, R, F, P, P, K), [], Options())
        assert (p.done, p.running, p.failed, p.pending, p.skipped) == (2, 1, 1, 2, 1)
        assert p.total == 7

    def test_no_eta_before_a_date_finished(self) -> None:
        assert progress(runs(R, P), [], Options()).eta is None

    def test_eta_from_mean_duration_and_parallelism(self) -> None:
        # 4 pending + 2 running counted half = 5 runs of 60 s on 2 slots = 150 s
        p = progress(
            runs(S, S, R, R, P, P, P, P),
            [timedelta(seconds=30), timedelta(seconds=90)],
            Options(parallelism=2),
        )
        assert p.eta == timedelta(seconds=150)

    def test_eta_is_zero_when_all_finished(self) -> None:
        assert progress(runs(S), [timedelta(seconds=5)], Options()).eta == timedelta()
