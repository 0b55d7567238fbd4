"""Backfills: create, advance, pause, resume, cancel (``core/backfill.py`` decides, the store
keeps; README "Backfill").

*Advancing* a backfill is one transaction that locks its row, settles the dates whose run ended,
skips what a failure under STOP skips, starts as many pending dates as free slots allow (each a
run with the date as its schedule time, in the backfill lane) and settles the backfill's state.
It is safe to do from any master at any time, any number of times: the lock makes concurrent
advances take turns, and a date is started only from PENDING. A master advances a backfill when one
of its runs ends there (``engine`` reports it), when it is created or resumed, and in a periodic
sweep (``app/backfill_driver.py``) that covers a master that died between a run's end and the
advance. So no backfill has an owner to lose: whichever master is alive carries it on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from dsched.errors import FailedPrecondition, FieldViolation, InvalidArgument
from dsched.options import RunTrigger
from dsched.states import WorkflowState
from dsched_server.app import runs
from dsched_server.app.transaction import Transaction
from dsched_server.core import backfill as core
from dsched_server.core.backfill import (
    BackfillRecord,
    BackfillRequestError,
    BackfillState,
    DateRun,
    DateState,
    OnFailure,
    Options,
)
from dsched_server.core.cron import CronError, compile_cron
from dsched_server.core.records import RunOptions
from dsched_server.store import backfills as store
from dsched_server.store import schedules as schedule_store
from dsched_server.store.instances import NewRun, RunTime

DEFAULT_CRON = "0 0 * * *"  # daily at midnight: DolphinScheduler's default for a complement
_MICROSECOND = timedelta(microseconds=1)


@dataclass(frozen=True, slots=True, kw_only=True)
class NewBackfill:
    project: str
    workflow: str
    # A range over ``cron`` (both ends inclusive), or an explicit list of dates.
    start: datetime | None = None
    end: datetime | None = None
    dates: tuple[datetime, ...] = ()
    cron: str = ""
    time_zone: str = ""  # "": the schedule's, else UTC
    options: Options = field(default_factory=Options)
    run_options: RunOptions = field(default_factory=RunOptions)


async def create(tx: Transaction, request: NewBackfill) -> BackfillRecord:
    """Checks and stores a backfill, then starts its first runs, all in ``tx``. Everything that
    could refuse it is checked before anything is written: INVALID_ARGUMENT with the field,
    FAILED_PRECONDITION (WORKFLOW_OFFLINE), NOT_FOUND."""
    workflow = await runs.online_workflow(tx, request.project, request.workflow)
    request = await _with_schedule_defaults(tx, request, workflow.id)
    cron, dates = _dates(request)
    past = await store.past_outcomes(tx.conn, workflow.id, dates)
    chosen = core.select_dates(dates, past, request.options)
    backfill_id = await store.create(
        tx.conn,
        workflow,
        dates=chosen,
        cron=cron,
        time_zone=request.time_zone,
        options=request.options,
        run_options=request.run_options,
        now=tx.now,
    )
    await advance(tx, backfill_id)
    return await get(tx, backfill_id)


async def _with_schedule_defaults(
    tx: Transaction, request: NewBackfill, workflow_id: int
) -> NewBackfill:
    """A range without a cron takes the cron of the workflow's schedule (if it has exactly one),
    and without a time zone the schedule's; else daily at 00:00 in UTC."""
    if request.dates or (request.cron and request.time_zone):
        return replace(request, time_zone=request.time_zone or "UTC")
    ids = await schedule_store.ids_of_workflow(tx.conn, workflow_id)
    if len(ids) != 1:
        return replace(
            request, cron=request.cron or DEFAULT_CRON, time_zone=request.time_zone or "UTC"
        )
    spec = (await schedule_store.get(tx.conn, ids[0])).spec
    return replace(
        request,
        cron=request.cron or spec.cron,
        time_zone=request.time_zone or spec.time_zone,
    )


def _dates(request: NewBackfill) -> tuple[str, list[datetime]]:
    """The cron used (empty for a list) and the dates, or INVALID_ARGUMENT naming the field."""
    try:
        request.options.check()
        if request.dates:
            if request.start is not None or request.end is not None:
                raise BackfillRequestError("dates", "give a list of dates or a range, not both")
            return "", core.explicit_dates(request.dates)
        if request.start is None or request.end is None:
            field = "start_time" if request.start is None else "end_time"
            raise BackfillRequestError(field, "a range needs both ends (or give dates)")
        try:
            cron = compile_cron(request.cron)
        except CronError as err:
            raise BackfillRequestError("cron", str(err)) from None
        zone = ZoneInfo(request.time_zone)
        fires = cron.fire_times(request.start - _MICROSECOND, zone)
        return cron.expr, core.expand_range(fires, start=request.start, end=request.end)
    except BackfillRequestError as err:
        field = {"start": "start_time", "end": "end_time"}.get(err.field, err.field)
        raise InvalidArgument(
            f"the backfill cannot be honoured: {err}",
            violations=[FieldViolation(field, str(err))],
        ) from None


async def get(tx: Transaction, backfill_id: int) -> BackfillRecord:
    return with_progress(await store.get(tx.conn, backfill_id))


def with_progress(record: BackfillRecord) -> BackfillRecord:
    """``record`` with its counts and ETA (from the run times of its finished dates)."""
    durations = [
        d.ended - d.started for d in record.dates if d.ended is not None and d.started is not None
    ]
    return replace(record, progress=core.progress(record.dates, durations, record.options))


async def advance(tx: Transaction, backfill_id: int) -> list[int]:
    """One step of the backfill (see the module docstring); returns the runs it started."""
    await store.lock(tx.conn, backfill_id)
    record = await store.get(tx.conn, backfill_id, with_dates=False)
    if record.state in core.FINISHED_BACKFILL_STATES:
        return []
    # Only the dates that can change are read (the running ones and the next to start), and the
    # counts on the backfill's row are kept up to date from the changes: reading every date on
    # every advance made a backfill quadratic in its length (365 dates: 365 x 365 rows read).
    options = record.options
    dates = {
        d.position: d
        for d in await store.open_dates(tx.conn, backfill_id, pending=options.parallelism)
    }
    before = dict(dates)
    changed: dict[int, DateRun] = {}
    failed = False
    for d in await _settled(tx, list(dates.values())):
        changed[d.position] = dates[d.position] = d
        failed = failed or d.state is DateState.FAILED
    if failed and options.on_failure is OnFailure.STOP:  # every pending date is skipped
        pending = await store.open_dates(tx.conn, backfill_id, pending=None)
        for d in pending:
            before.setdefault(d.position, d)
            dates.setdefault(d.position, d)
        for d in core.after_failure(list(dates.values()), options):
            changed[d.position] = dates[d.position] = replace(d, state=DateState.SKIPPED)
    started: list[int] = []
    starts = core.to_start(record.state, list(dates.values()), options)
    if starts:
        workflow = await runs.online_workflow(tx, record.project, record.workflow)
        new = [
            NewRun(
                workflow,
                record.run_options,
                RunTime(
                    schedule_time=d.when,
                    time_zone=record.time_zone,
                    trigger=RunTrigger.BACKFILL,
                    backfill_id=record.id,
                ),
            )
            for d in starts
        ]
        started = await runs.create_many(tx, new)
        for d, instance_id in zip(starts, started, strict=True):
            running = replace(d, state=DateState.RUNNING, instance_id=instance_id, started=tx.now)
            changed[d.position] = dates[d.position] = running
    await store.set_dates(tx.conn, backfill_id, list(changed.values()))
    assert record.progress is not None  # the row's counts
    counts = core.progress_counts(record.progress)
    if changed:
        counts = core.recount(counts, [before[p] for p in changed], changed.values())
        await store.set_counts(tx.conn, backfill_id, counts)
    state = core.settled_by_counts(record.state, counts)
    if state is not record.state:
        await store.set_state(tx.conn, backfill_id, state, tx.now)
    return started


async def _settled(tx: Transaction, dates: Sequence[DateRun]) -> list[DateRun]:
    """The running dates whose run has ended, with their outcome. A paused run holds its slot
    (it may be resumed); a failed or stopped one, or one deleted by a clean-up, did not succeed."""
    running = [d for d in dates if d.state is DateState.RUNNING and d.instance_id is not None]
    states = await store.run_states(tx.conn, [d.instance_id for d in running if d.instance_id])
    out: list[DateRun] = []
    for d in running:
        assert d.instance_id is not None
        state, ended = states.get(d.instance_id, (None, None))
        if state is WorkflowState.SUCCEEDED:
            out.append(replace(d, state=DateState.SUCCEEDED, ended=ended or tx.now))
        elif state is None or state in (WorkflowState.FAILED, WorkflowState.STOPPED):
            out.append(replace(d, state=DateState.FAILED, ended=ended or tx.now))
    return out


async def pause(tx: Transaction, backfill_id: int) -> BackfillRecord:
    return await _move(tx, backfill_id, BackfillState.RUNNING, BackfillState.PAUSED, "pause")


async def resume(tx: Transaction, backfill_id: int) -> BackfillRecord:
    await _move(tx, backfill_id, BackfillState.PAUSED, BackfillState.RUNNING, "resume")
    await advance(tx, backfill_id)
    return await get(tx, backfill_id)


async def cancel(tx: Transaction, backfill_id: int) -> tuple[BackfillRecord, list[int]]:
    """Skips the pending dates; returns the backfill and the runs under way, which the caller
    stops once this has committed."""
    await store.lock(tx.conn, backfill_id)
    record = await store.get(tx.conn, backfill_id)
    if record.state in core.FINISHED_BACKFILL_STATES:
        raise _refused(record, "cancel")
    skipped = {
        d.position: replace(d, state=DateState.SKIPPED) for d in core.on_cancel(record.dates)
    }
    await store.set_dates(tx.conn, backfill_id, list(skipped.values()))
    await store.set_counts(
        tx.conn, backfill_id, core.count(skipped.get(d.position, d) for d in record.dates)
    )
    await store.set_state(tx.conn, backfill_id, BackfillState.CANCELLED, tx.now)
    running = [
        d.instance_id
        for d in record.dates
        if d.state is DateState.RUNNING and d.instance_id is not None
    ]
    return await get(tx, backfill_id), running


async def _move(
    tx: Transaction, backfill_id: int, src: BackfillState, dst: BackfillState, action: str
) -> BackfillRecord:
    await store.lock(tx.conn, backfill_id)
    record = await store.get(tx.conn, backfill_id, with_dates=False)
    if record.state is not src:
        raise _refused(record, action)
    await store.set_state(tx.conn, backfill_id, dst, tx.now)
    return await get(tx, backfill_id)


def _refused(record: BackfillRecord, action: str) -> FailedPrecondition:
    return FailedPrecondition(
        f"cannot {action} backfill {record.id}: it is {record.state.name}",
        reason="ILLEGAL_BACKFILL_STATE",
        metadata={"backfill": str(record.id), "state": record.state.name},
    )
