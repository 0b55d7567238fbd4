"""MasterService: schedules (parse -> ``app/schedules.py`` -> render)."""

from __future__ import annotations

from typing import Any

from grpc import aio

from dsched.convert import FAILURE_STRATEGY, PRIORITY
from dsched.v1 import schedule_pb2 as spb
from dsched_server.api import convert
from dsched_server.api.context import MasterContext
from dsched_server.api.idempotency import once
from dsched_server.api.pages import collect, sync
from dsched_server.api.validation import Checks, check_id_request
from dsched_server.app import schedules
from dsched_server.app.transaction import Transaction
from dsched_server.core.cron import MAX_LENGTH as MAX_CRON_LENGTH
from dsched_server.core.cron import CronError, compile_cron
from dsched_server.core.records import RunOptions
from dsched_server.core.schedule import (
    DEFAULT_CATCH_UP_CAP,
    MAX_CATCH_UP_CAP,
    CatchUp,
    Overlap,
    ScheduleRecord,
    ScheduleSpec,
    Window,
)
from dsched_server.store import paging
from dsched_server.store import schedules as store

Ctx = aio.ServicerContext[Any, Any]
MAX_PREVIEW = 100


def _spec(msg: spb.Schedule, checks: Checks, field: str = "schedule") -> ScheduleSpec:
    checks.name(f"{field}.project", msg.project, "project name")
    checks.name(f"{field}.workflow", msg.workflow, "workflow name")
    if len(msg.cron) > MAX_CRON_LENGTH:
        checks.add(f"{field}.cron", f"longer than {MAX_CRON_LENGTH} characters")
    zone = checks.time_zone(f"{field}.time_zone", msg.time_zone)
    start = (
        checks.instant(f"{field}.start_time", msg.start_time)
        if msg.HasField("start_time")
        else None
    )
    end = checks.instant(f"{field}.end_time", msg.end_time) if msg.HasField("end_time") else None
    if not 0 <= msg.catch_up_cap <= MAX_CATCH_UP_CAP:
        checks.add(f"{field}.catch_up_cap", f"must be 1 to {MAX_CATCH_UP_CAP} (0 means 100)")
    checks.params(f"{field}.params", msg.params)
    checks.templates(f"{field}.params", msg.params)
    checks.optional_worker_group(f"{field}.worker_group", msg.worker_group)
    return ScheduleSpec(
        cron=msg.cron,
        time_zone=zone,
        window=Window(start=start, end=end),
        catch_up=checks.by_name(
            CatchUp,
            spb.ScheduleCatchUp,
            "SCHEDULE_CATCH_UP_",
            f"{field}.catch_up",
            msg.catch_up,
            CatchUp.LATEST,
        ),
        catch_up_cap=msg.catch_up_cap or DEFAULT_CATCH_UP_CAP,
        overlap=checks.by_name(
            Overlap,
            spb.ScheduleOverlap,
            "SCHEDULE_OVERLAP_",
            f"{field}.overlap",
            msg.overlap,
            Overlap.RUN,
        ),
        run_options=RunOptions(
            params=dict(msg.params),
            failure_strategy=checks.failure_strategy(
                f"{field}.failure_strategy", msg.failure_strategy
            ),
            priority=checks.priority(f"{field}.priority", msg.priority),
            worker_group=msg.worker_group,
        ),
    )


def render(record: ScheduleRecord) -> spb.Schedule:
    spec = record.spec
    return spb.Schedule(
        id=record.id,
        project=record.project,
        workflow=record.workflow,
        cron=spec.cron,
        time_zone=spec.time_zone,
        start_time=convert.timestamp(spec.window.start),
        end_time=convert.timestamp(spec.window.end),
        online=record.online,
        catch_up=f"SCHEDULE_CATCH_UP_{spec.catch_up.name}",
        catch_up_cap=spec.catch_up_cap,
        overlap=f"SCHEDULE_OVERLAP_{spec.overlap.name}",
        failure_strategy=FAILURE_STRATEGY.number(spec.run_options.failure_strategy),
        priority=PRIORITY.number(spec.run_options.priority),
        worker_group=spec.run_options.worker_group,
        params=dict(spec.run_options.params),
        next_fire_time=convert.timestamp(record.next_fire_time if record.online else None),
        last_fire_time=convert.timestamp(record.last_fire_time),
        create_time=convert.timestamp(record.create_time),
        update_time=convert.timestamp(record.update_time),
    )


class SchedulesApi:
    ctx: MasterContext

    async def CreateSchedule(self, request: spb.CreateScheduleRequest, context: Ctx) -> Any:
        checks = Checks()
        checks.request_id(request.request_id)
        spec = _spec(request.schedule, checks)
        checks.raise_if_any()
        msg = request.schedule

        async def work(tx: Transaction) -> spb.CreateScheduleResponse:
            record = await schedules.create(
                tx, msg.project, msg.workflow, spec, self.ctx.min_schedule_interval
            )
            return spb.CreateScheduleResponse(schedule=render(record))

        answer = await once(self.ctx, request, "CreateSchedule", spb.CreateScheduleResponse, work)
        self.ctx.schedule_changed(answer.schedule.id)
        return answer

    async def UpdateSchedule(self, request: spb.UpdateScheduleRequest, context: Ctx) -> Any:
        checks = Checks()
        checks.positive_id("schedule.id", request.schedule.id)
        checks.request_id(request.request_id)
        spec = _spec(request.schedule, checks)
        checks.raise_if_any()
        schedule_id = request.schedule.id

        async def work(tx: Transaction) -> spb.UpdateScheduleResponse:
            record = await schedules.update(tx, schedule_id, spec, self.ctx.min_schedule_interval)
            return spb.UpdateScheduleResponse(schedule=render(record))

        answer = await once(self.ctx, request, "UpdateSchedule", spb.UpdateScheduleResponse, work)
        self.ctx.schedule_changed(schedule_id)
        return answer

    async def GetSchedule(self, request: spb.GetScheduleRequest, context: Ctx) -> Any:
        checks = Checks()
        checks.positive_id("id", request.id)
        checks.raise_if_any()
        async with self.ctx.db.read() as conn:
            record = await store.get(conn, request.id)
        return spb.GetScheduleResponse(schedule=render(record))

    async def ListSchedules(self, request: spb.ListSchedulesRequest, context: Ctx) -> Any:
        checks = Checks()
        checks.optional_name("project", request.project, "project name")
        checks.optional_name("workflow", request.workflow, "workflow name")
        if request.workflow and not request.project:
            checks.add("project", "required when filtering by workflow")
        checks.raise_if_any()
        query = {"project": request.project, "workflow": request.workflow}
        cursor = paging.cursor(
            "schedules", query, paging.ID_KEY, request.page_size, request.page_token
        )
        async with self.ctx.db.read() as conn:
            items, token = await collect(
                cursor,
                lambda before, n: store.list_schedules(
                    conn,
                    project=request.project,
                    workflow=request.workflow,
                    after=before,
                    limit=n,
                ),
                lambda r: r.id,
                sync(render),
            )
        return spb.ListSchedulesResponse(schedules=items, next_page_token=token)

    async def DeleteSchedule(self, request: spb.DeleteScheduleRequest, context: Ctx) -> Any:
        check_id_request(request.id, request.request_id)

        async def work(tx: Transaction) -> spb.DeleteScheduleResponse:
            await schedules.delete(tx, request.id)
            return spb.DeleteScheduleResponse()

        answer = await once(self.ctx, request, "DeleteSchedule", spb.DeleteScheduleResponse, work)
        self.ctx.schedule_changed(request.id)
        return answer

    async def SetScheduleState(self, request: spb.SetScheduleStateRequest, context: Ctx) -> Any:
        check_id_request(request.id, request.request_id)

        async def work(tx: Transaction) -> spb.SetScheduleStateResponse:
            record = await schedules.set_online(tx, request.id, request.online)
            return spb.SetScheduleStateResponse(schedule=render(record))

        answer = await once(
            self.ctx, request, "SetScheduleState", spb.SetScheduleStateResponse, work
        )
        self.ctx.schedule_changed(request.id)
        return answer

    async def PreviewSchedule(self, request: spb.PreviewScheduleRequest, context: Ctx) -> Any:
        checks = Checks()
        if not 0 <= request.count <= MAX_PREVIEW:
            checks.add("count", f"must be 1 to {MAX_PREVIEW} (0 means 10)")
        if bool(request.id) == bool(request.cron):
            checks.add("id", "give a schedule's id or a cron, not both")
        if request.id < 0:
            checks.add("id", "must be a positive id")
        zone = checks.time_zone("time_zone", request.time_zone)
        checks.raise_if_any()
        if request.id:
            async with self.ctx.db.read() as conn:
                spec = (await store.get(conn, request.id)).spec
        else:
            spec = ScheduleSpec(cron=request.cron, time_zone=zone)
        try:
            cron = compile_cron(spec.cron)
        except CronError as err:
            checks.add("cron", str(err))
            checks.raise_if_any()
            raise  # not reached
        times = schedules.preview(cron, spec, self.ctx.clock.now(), request.count or 10)
        response = spb.PreviewScheduleResponse()
        for when in times:
            response.fire_times.add().FromDatetime(when)
        return response
