"""Backfill ("complement data") as a managed workload: which dates it covers, which of them to
start next, when it is over, and how far along it is. Pure: the store keeps one row per backfill
and one per date, the engine asks these functions what to do and carries it out.

What differs from DolphinScheduler's complement, on purpose:

* PARALLEL n means *n runs at a time* over one queue of dates, not the dates cut into chunks of n
  with one serial chain per chunk (which gives ceil(dates / n) concurrent chains).
* Nothing is materialised ahead: a date becomes a run only when a slot of the backfill is free, so a
  1,000-date backfill holds at most ``parallelism`` instances in flight.
* The size is checked before anything is stored: a request that would expand to more than the cap
  (100 years of a minutely cron) is refused, and expanding it stops at cap + 1 dates.
* A failed date never silently ends the others: with ``on_failure=CONTINUE`` (the default) every
  date is tried; with ``STOP`` the dates not yet started are marked SKIPPED, so progress says so.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from dsched_server.core.records import RunOptions

DEFAULT_MAX_DATES = 1000
MAX_PARALLELISM = 32


class Order(enum.Enum):
    ASCENDING = "ascending"
    DESCENDING = "descending"


class Reprocess(enum.Enum):
    """Which dates of the range a backfill runs, given the runs the workflow already has."""

    ALL = "all"  # every date
    FAILED = "failed"  # dates whose latest run did not succeed (failed, stopped); not unrun ones
    MISSING = "missing"  # dates with no run at all


class OnFailure(enum.Enum):
    CONTINUE = "continue"
    STOP = "stop"


class DateState(enum.Enum):
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SKIPPED = "skipped"  # never started: the backfill was cancelled or stopped at a failure


class BackfillState(enum.Enum):
    RUNNING = "running"
    PAUSED = "paused"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


FINISHED_DATE_STATES = frozenset({DateState.SUCCEEDED, DateState.FAILED, DateState.SKIPPED})
FINISHED_BACKFILL_STATES = frozenset(
    {BackfillState.SUCCEEDED, BackfillState.FAILED, BackfillState.CANCELLED}
)


class PastOutcome(enum.Enum):
    """What the workflow's existing runs say about one date (input to :func:`select_dates`)."""

    SUCCEEDED = "succeeded"
    UNSUCCESSFUL = "unsuccessful"  # the latest run of that date failed or was stopped
    RUNNING = "running"


class BackfillRequestError(ValueError):
    """A backfill that cannot be honoured; ``field`` names the request field at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True, slots=True)
class Options:
    order: Order = Order.ASCENDING
    parallelism: int = 1  # 1 is SERIAL: one run at a time, in order
    reprocess: Reprocess = Reprocess.ALL
    on_failure: OnFailure = OnFailure.CONTINUE

    def check(self) -> None:
        if not 1 <= self.parallelism <= MAX_PARALLELISM:
            raise BackfillRequestError(
                "parallelism", f"parallelism must be 1 to {MAX_PARALLELISM}, not {self.parallelism}"
            )


def expand_range(
    fire_times: Iterable[datetime], *, start: datetime, end: datetime, cap: int = DEFAULT_MAX_DATES
) -> list[datetime]:
    """The fire times within [start, end] (both inclusive), from an ascending iterable (a
    cron's fire times from ``start``, possibly endless). Stops reading at cap + 1 dates, so an
    enormous range costs no more than the cap to refuse."""
    if end < start:
        raise BackfillRequestError(
            "end", f"end {end.isoformat()} is before start {start.isoformat()}"
        )
    dates: list[datetime] = []
    for when in fire_times:
        if when < start:
            continue
        if when > end:
            break
        dates.append(when)
        if len(dates) > cap:
            raise BackfillRequestError(
                "end", f"the range holds more than {cap} dates; split it or narrow it"
            )
    if not dates:
        raise BackfillRequestError("start", "the range holds no fire time of the schedule")
    return dates


def explicit_dates(dates: Iterable[datetime], *, cap: int = DEFAULT_MAX_DATES) -> list[datetime]:
    """An explicit list, deduplicated and ascending; refused when empty or over the cap."""
    unique: set[datetime] = set()
    for when in dates:
        unique.add(when)
        if len(unique) > cap:
            raise BackfillRequestError("dates", f"more than {cap} dates; split the backfill")
    if not unique:
        raise BackfillRequestError("dates", "no dates given")
    return sorted(unique)


def select_dates(
    dates: Sequence[datetime],
    past: Mapping[datetime, PastOutcome],
    options: Options,
) -> list[datetime]:
    """The dates to run, in run order. A date with a run still going is never run again beside it
    (whatever the policy), so a backfill cannot create a second concurrent run of one date."""
    chosen: list[datetime] = []
    for when in dates:
        outcome = past.get(when)
        if outcome is PastOutcome.RUNNING:
            continue
        if options.reprocess is Reprocess.FAILED and outcome is not PastOutcome.UNSUCCESSFUL:
            continue
        if options.reprocess is Reprocess.MISSING and outcome is not None:
            continue
        chosen.append(when)
    chosen.sort(reverse=options.order is Order.DESCENDING)
    return chosen


@dataclass(frozen=True, slots=True)
class DateRun:
    """One date of a backfill: its position in run order and where it stands."""

    position: int
    when: datetime
    state: DateState
    instance_id: int | None = None  # its run, once started
    started: datetime | None = None
    ended: datetime | None = None


def to_start(state: BackfillState, dates: Sequence[DateRun], options: Options) -> list[DateRun]:
    """The pending dates to start now, in run order: as many as free slots allow, none while paused
    or finished. SERIAL (parallelism 1) is the same rule with one slot, so its order holds."""
    if state is not BackfillState.RUNNING:
        return []
    running = sum(1 for d in dates if d.state is DateState.RUNNING)
    free = options.parallelism - running
    if free <= 0:
        return []
    pending = (d for d in sorted(dates, key=lambda d: d.position) if d.state is DateState.PENDING)
    return list(itertools.islice(pending, free))


def after_failure(dates: Sequence[DateRun], options: Options) -> list[DateRun]:
    """The dates to mark SKIPPED when one has failed: the pending ones under ``STOP``, none else."""
    if options.on_failure is OnFailure.CONTINUE:
        return []
    return [d for d in dates if d.state is DateState.PENDING]


def on_cancel(dates: Sequence[DateRun]) -> list[DateRun]:
    """Cancelling skips every pending date; the running ones are the caller's to stop."""
    return [d for d in dates if d.state is DateState.PENDING]


def settled_state(state: BackfillState, dates: Sequence[DateRun]) -> BackfillState:
    """The backfill's state once nothing runs and nothing can start: SUCCEEDED if every date
    succeeded, FAILED if one failed or was skipped for a failure, unchanged while work remains
    (a paused backfill with pending dates stays PAUSED; a cancelled one stays CANCELLED)."""
    return settled_by_counts(state, count(dates))


def settled_by_counts(state: BackfillState, counts: Mapping[DateState, int]) -> BackfillState:
    """:func:`settled_state` from the number of dates in each state (what the backfill's row
    keeps), so that advancing a backfill needs only the dates that can change."""
    if state in FINISHED_BACKFILL_STATES:
        return state
    if any(counts.get(s, 0) for s in DateState if s not in FINISHED_DATE_STATES):
        return state
    if all(counts.get(s, 0) == 0 for s in DateState if s is not DateState.SUCCEEDED):
        return BackfillState.SUCCEEDED
    return BackfillState.FAILED


def count(dates: Iterable[DateRun]) -> dict[DateState, int]:
    """The number of dates in each state (every state present, 0 or more)."""
    out = dict.fromkeys(DateState, 0)
    for d in dates:
        out[d.state] += 1
    return out


def recount(
    counts: Mapping[DateState, int], before: Iterable[DateRun], after: Iterable[DateRun]
) -> dict[DateState, int]:
    """``counts`` once the dates ``before`` have become ``after`` (the same dates, changed)."""
    out = {s: counts.get(s, 0) for s in DateState}
    for d in before:
        out[d.state] -= 1
    for d in after:
        out[d.state] += 1
    if any(n < 0 for n in out.values()):
        raise ValueError(f"counts {dict(counts)} do not hold the dates changed")
    return out


def progress_counts(p: Progress) -> dict[DateState, int]:
    """The counts a stored :class:`Progress` holds."""
    return {
        DateState.SUCCEEDED: p.done,
        DateState.RUNNING: p.running,
        DateState.FAILED: p.failed,
        DateState.PENDING: p.pending,
        DateState.SKIPPED: p.skipped,
    }


BACKFILL_TRANSITIONS: Mapping[BackfillState, frozenset[BackfillState]] = {
    BackfillState.RUNNING: frozenset(
        {
            BackfillState.PAUSED,
            BackfillState.CANCELLED,
            BackfillState.SUCCEEDED,
            BackfillState.FAILED,
        }
    ),
    BackfillState.PAUSED: frozenset({BackfillState.RUNNING, BackfillState.CANCELLED}),
    BackfillState.SUCCEEDED: frozenset(),
    BackfillState.FAILED: frozenset(),
    BackfillState.CANCELLED: frozenset(),
}


def backfill_transition_allowed(src: BackfillState, dst: BackfillState) -> bool:
    return dst in BACKFILL_TRANSITIONS[src]


@dataclass(frozen=True, slots=True)
class Progress:
    done: int  # succeeded
    running: int
    failed: int
    pending: int
    skipped: int
    eta: timedelta | None  # None until one date has finished (nothing to estimate from)

    @property
    def total(self) -> int:
        return self.done + self.running + self.failed + self.pending + self.skipped


def progress(
    dates: Sequence[DateRun], durations: Sequence[timedelta], options: Options
) -> Progress:
    """Counts by state and an ETA: the mean duration of the finished runs times the rounds of
    ``parallelism`` still needed for the pending and running dates (running ones counted as
    half done). An estimate, said to be one in the CLI; ``durations`` are the finished dates'
    run times."""
    counts = count(dates)
    eta: timedelta | None = None
    if durations:
        mean = sum(durations, timedelta()) / len(durations)
        remaining = counts[DateState.PENDING] + counts[DateState.RUNNING] / 2
        eta = mean * remaining / options.parallelism
    return Progress(
        done=counts[DateState.SUCCEEDED],
        running=counts[DateState.RUNNING],
        failed=counts[DateState.FAILED],
        pending=counts[DateState.PENDING],
        skipped=counts[DateState.SKIPPED],
        eta=eta,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class BackfillRecord:
    """A stored backfill. ``dates`` in run order (empty when listed without them)."""

    id: int
    project: str
    workflow: str
    workflow_code: int
    state: BackfillState
    cron: str
    time_zone: str
    options: Options
    run_options: RunOptions
    create_time: datetime
    end_time: datetime | None
    dates: tuple[DateRun, ...] = ()
    progress: Progress | None = None
