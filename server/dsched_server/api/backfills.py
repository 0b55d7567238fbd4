"""MasterService: backfills (parse -> ``app/backfills.py`` -> render)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from google.protobuf import duration_pb2
from grpc import aio

from dsched.convert import FAILURE_STRATEGY, PRIORITY
from dsched.errors import DschedError
from dsched.v1 import backfill_pb2 as bpb
from dsched_server.api import convert
from dsched_server.api.context import MasterContext
from dsched_server.api.idempotency import once
from dsched_server.api.pages import collect, sync
from dsched_server.api.validation import Checks, check_id_request
from dsched_server.app import backfills, controls
from dsched_server.app.transaction import Transaction
from dsched_server.core.backfill import (
    MAX_PARALLELISM,
    BackfillRecord,
    BackfillState,
    DateState,
    OnFailure,
    Options,
    Order,
    Reprocess,
)
from dsched_server.core.cron import MAX_LENGTH as MAX_CRON_LENGTH
from dsched_server.core.records import RunOptions
from dsched_server.store import backfills as store
from dsched_server.store import paging

log = logging.getLogger(__name__)

Ctx = aio.ServicerContext[Any, Any]
Control = bpb.PauseBackfillRequest | bpb.ResumeBackfillRequest | bpb.CancelBackfillRequest
R = TypeVar("R", bpb.PauseBackfillResponse, bpb.ResumeBackfillResponse, bpb.CancelBackfillResponse)
MAX_DATES_IN_REQUEST = 100_000  # duplicates merge, but reading them is bounded


def _new_backfill(request: bpb.CreateBackfillRequest) -> backfills.NewBackfill:
    checks = Checks()
    checks.name("project", request.project, "project name")
    checks.name("workflow", request.workflow, "workflow name")
    checks.params("params", request.params)
    checks.templates("params", request.params)
    checks.optional_worker_group("worker_group", request.worker_group)
    checks.request_id(request.request_id)
    if len(request.cron) > MAX_CRON_LENGTH:
        checks.add("cron", f"longer than {MAX_CRON_LENGTH} characters")
    zone = checks.time_zone("time_zone", request.time_zone) if request.time_zone else ""
    start = (
        checks.instant("start_time", request.start_time) if request.HasField("start_time") else None
    )
    end = checks.instant("end_time", request.end_time) if request.HasField("end_time") else None
    if len(request.dates) > MAX_DATES_IN_REQUEST:
        checks.add("dates", f"more than {MAX_DATES_IN_REQUEST} entries")
        dates: list[Any] = []
    else:
        dates = [checks.instant(f"dates[{i}]", d) for i, d in enumerate(request.dates)]
    if not 0 <= request.parallelism <= MAX_PARALLELISM:
        checks.add("parallelism", f"must be 1 to {MAX_PARALLELISM} (0 means 1)")
    options = Options(
        order=checks.by_name(
            Order,
            bpb.BackfillOrder,
            "BACKFILL_ORDER_",
            "order",
            request.order,
            Order.ASCENDING,
        ),
        parallelism=min(max(request.parallelism, 1), MAX_PARALLELISM),
        reprocess=checks.by_name(
            Reprocess,
            bpb.BackfillReprocess,
            "BACKFILL_REPROCESS_",
            "reprocess",
            request.reprocess,
            Reprocess.ALL,
        ),
        on_failure=checks.by_name(
            OnFailure,
            bpb.BackfillFailure,
            "BACKFILL_FAILURE_",
            "on_failure",
            request.on_failure,
            OnFailure.CONTINUE,
        ),
    )
    run_options = RunOptions(
        params=dict(request.params),
        failure_strategy=checks.failure_strategy("failure_strategy", request.failure_strategy),
        priority=checks.priority("priority", request.priority),
        worker_group=request.worker_group,
    )
    checks.raise_if_any()
    return backfills.NewBackfill(
        project=request.project,
        workflow=request.workflow,
        start=start,
        end=end,
        dates=tuple(d for d in dates if d is not None),
        cron=request.cron,
        time_zone=zone,
        options=options,
        run_options=run_options,
    )


def render(record: BackfillRecord, *, with_dates: bool = True) -> bpb.Backfill:
    o = record.options
    msg = bpb.Backfill(
        id=record.id,
        project=record.project,
        workflow=record.workflow,
        state=f"BACKFILL_STATE_{record.state.name}",
        time_zone=record.time_zone,
        order=f"BACKFILL_ORDER_{o.order.name}",
        parallelism=o.parallelism,
        reprocess=f"BACKFILL_REPROCESS_{o.reprocess.name}",
        on_failure=f"BACKFILL_FAILURE_{o.on_failure.name}",
        failure_strategy=FAILURE_STRATEGY.number(record.run_options.failure_strategy),
        priority=PRIORITY.number(record.run_options.priority),
        worker_group=record.run_options.worker_group,
        params=dict(record.run_options.params),
        create_time=convert.timestamp(record.create_time),
        end_time=convert.timestamp(record.end_time),
        cron=record.cron,
    )
    if with_dates:
        for d in record.dates:
            msg.dates.add().FromDatetime(d.when)
    p = record.progress
    if p is not None:
        msg.progress.CopyFrom(
            bpb.BackfillProgress(
                succeeded=p.done,
                running=p.running,
                failed=p.failed,
                pending=p.pending,
                skipped=p.skipped,
                eta=_duration(p.eta) if p.eta and (p.pending or p.running) else None,
            )
        )
    return msg


def _duration(value: Any) -> duration_pb2.Duration:
    out = duration_pb2.Duration()
    out.FromTimedelta(value)
    return out


class BackfillsApi:
    ctx: MasterContext

    async def CreateBackfill(self, request: bpb.CreateBackfillRequest, context: Ctx) -> Any:
        new = _new_backfill(request)

        async def work(tx: Transaction) -> bpb.CreateBackfillResponse:
            return bpb.CreateBackfillResponse(backfill=render(await backfills.create(tx, new)))

        return await once(self.ctx, request, "CreateBackfill", bpb.CreateBackfillResponse, work)

    async def GetBackfill(self, request: bpb.GetBackfillRequest, context: Ctx) -> Any:
        checks = Checks()
        checks.positive_id("id", request.id)
        checks.raise_if_any()
        async with self.ctx.db.read() as conn:
            record = await store.get(conn, request.id)
        record = backfills.with_progress(record)
        return bpb.GetBackfillResponse(backfill=render(record))

    async def ListBackfills(self, request: bpb.ListBackfillsRequest, context: Ctx) -> Any:
        checks = Checks()
        checks.optional_name("project", request.project, "project name")
        checks.optional_name("workflow", request.workflow, "workflow name")
        if request.workflow and not request.project:
            checks.add("project", "required when filtering by workflow")
        states: list[BackfillState] = []
        for i, number in enumerate(request.states):
            state = checks.by_name(
                BackfillState,
                bpb.BackfillState,
                "BACKFILL_STATE_",
                f"states[{i}]",
                number,
                BackfillState.RUNNING,
            )
            if number == 0:
                checks.add(f"states[{i}]", "unknown value 0")
            states.append(state)
        checks.raise_if_any()
        query = {
            "project": request.project,
            "workflow": request.workflow,
            "states": sorted(s.name for s in states),
        }
        cursor = paging.cursor(
            "backfills", query, paging.ID_KEY, request.page_size, request.page_token
        )
        async with self.ctx.db.read() as conn:
            items, token = await collect(
                cursor,
                lambda before, n: store.list_backfills(
                    conn,
                    project=request.project,
                    workflow=request.workflow,
                    states=states,
                    after=before,
                    limit=n,
                ),
                lambda r: r.id,
                sync(lambda r: render(r, with_dates=False)),
            )
        return bpb.ListBackfillsResponse(backfills=items, next_page_token=token)

    async def PauseBackfill(self, request: bpb.PauseBackfillRequest, context: Ctx) -> Any:
        return await self._control(
            request, "PauseBackfill", bpb.PauseBackfillResponse, backfills.pause
        )

    async def ResumeBackfill(self, request: bpb.ResumeBackfillRequest, context: Ctx) -> Any:
        return await self._control(
            request, "ResumeBackfill", bpb.ResumeBackfillResponse, backfills.resume
        )

    async def CancelBackfill(self, request: bpb.CancelBackfillRequest, context: Ctx) -> Any:
        async def cancel(tx: Transaction, backfill_id: int) -> BackfillRecord:
            record, _running = await backfills.cancel(tx, backfill_id)
            return record

        answer = await self._control(request, "CancelBackfill", bpb.CancelBackfillResponse, cancel)
        await self._stop_runs(request.id)
        return answer

    async def _control(
        self,
        request: Control,
        method: str,
        response_type: type[R],
        action: Callable[[Transaction, int], Awaitable[BackfillRecord]],
    ) -> R:
        check_id_request(request.id, request.request_id)

        async def work(tx: Transaction) -> R:
            return response_type(backfill=render(await action(tx, request.id)))

        return await once(self.ctx, request, method, response_type, work)

    async def _stop_runs(self, backfill_id: int) -> None:
        """Stops the runs of a cancelled backfill that are still going (recorded for their
        owners; not waited for). A retried cancel stops what is left."""
        async with self.ctx.db.read() as conn:
            record = await store.get(conn, backfill_id)
        for d in record.dates:
            if d.state is DateState.RUNNING and d.instance_id is not None:
                try:
                    await controls.stop(self.ctx, d.instance_id, wait=0)
                except DschedError as exc:  # it ended meanwhile
                    log.info(
                        "run %s of backfill %s not stopped: %s", d.instance_id, backfill_id, exc
                    )
