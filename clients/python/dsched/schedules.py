"""Schedules in the SDK: :class:`Schedule` (what a workflow file says) and the client calls.

::

    with Workflow("nightly", project="analytics",
                  schedule=Schedule("0 2 * * *", tz="Europe/Berlin")) as wf:
        ...
    wf.submit()   # stores the workflow, then creates (or updates) its schedule and puts it online
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from dsched import coerce, convert
from dsched.options import CatchUp, FailureStrategy, Overlap, Priority
from dsched.results import Page, ScheduleInfo
from dsched.rpc import RpcBase, iter_pages
from dsched.rpc import request_id as _rid
from dsched.v1 import schedule_pb2


@dataclass(frozen=True, slots=True)
class Schedule:
    """A cron in a time zone, and what its runs get. ``online``: whether submitting the workflow
    puts it online (its workflow must be online, which :meth:`Workflow.submit` ensures)."""

    cron: str
    tz: str = "UTC"
    start: datetime | None = None
    end: datetime | None = None
    catch_up: CatchUp | str = CatchUp.LATEST
    catch_up_cap: int = 100
    overlap: Overlap | str = Overlap.RUN
    failure_strategy: FailureStrategy | str | None = None
    priority: Priority | str | None = None
    worker_group: str = ""
    params: Mapping[str, object] = field(default_factory=dict)
    online: bool = True

    def to_proto(self, project: str, workflow: str, id: int = 0) -> schedule_pb2.Schedule:
        msg = schedule_pb2.Schedule(
            id=id,
            project=project,
            workflow=workflow,
            cron=self.cron,
            time_zone=self.tz,
            catch_up=convert.CATCH_UP.number(coerce.enum_value(CatchUp, self.catch_up, "catch_up")),
            catch_up_cap=self.catch_up_cap,
            overlap=convert.OVERLAP.number(coerce.enum_value(Overlap, self.overlap, "overlap")),
            worker_group=self.worker_group,
            params=coerce.params(self.params),
        )
        if self.start is not None:
            msg.start_time.FromDatetime(coerce.aware(self.start, "start"))
        if self.end is not None:
            msg.end_time.FromDatetime(coerce.aware(self.end, "end"))
        failure = coerce.optional_enum(FailureStrategy, self.failure_strategy, "failure_strategy")
        if failure is not None:
            msg.failure_strategy = convert.FAILURE_STRATEGY.number(failure)
        prio = coerce.optional_enum(Priority, self.priority, "priority")
        if prio is not None:
            msg.priority = convert.PRIORITY.number(prio)
        return msg


class ScheduleCalls(RpcBase):
    """Schedules; part of :class:`dsched.Client`."""

    def create_schedule(
        self, project: str, workflow: str, schedule: Schedule, *, request_id: str | None = None
    ) -> ScheduleInfo:
        """Stores a schedule of the workflow (offline; see :meth:`set_schedule_online`)."""
        req = schedule_pb2.CreateScheduleRequest(
            schedule=schedule.to_proto(project, workflow), request_id=_rid(request_id)
        )
        return convert.schedule_from_proto(self._call(self._master.CreateSchedule, req).schedule)

    def update_schedule(
        self,
        id: int,
        project: str,
        workflow: str,
        schedule: Schedule,
        *,
        request_id: str | None = None,
    ) -> ScheduleInfo:
        req = schedule_pb2.UpdateScheduleRequest(
            schedule=schedule.to_proto(project, workflow, id), request_id=_rid(request_id)
        )
        return convert.schedule_from_proto(self._call(self._master.UpdateSchedule, req).schedule)

    def get_schedule(self, id: int) -> ScheduleInfo:
        req = schedule_pb2.GetScheduleRequest(id=id)
        return convert.schedule_from_proto(self._call(self._master.GetSchedule, req).schedule)

    def list_schedules(self, *, project: str = "", workflow: str = "") -> Iterator[ScheduleInfo]:
        """Schedules, newest first, fetched page by page."""

        def page(token: str) -> Page[ScheduleInfo]:
            req = schedule_pb2.ListSchedulesRequest(
                project=project, workflow=workflow, page_size=200, page_token=token
            )
            resp = self._call(self._master.ListSchedules, req)
            items = tuple(convert.schedule_from_proto(s) for s in resp.schedules)
            return Page(items, resp.next_page_token)

        return iter_pages(page)

    def delete_schedule(self, id: int, *, request_id: str | None = None) -> None:
        req = schedule_pb2.DeleteScheduleRequest(id=id, request_id=_rid(request_id))
        self._call(self._master.DeleteSchedule, req)

    def set_schedule_online(
        self, id: int, online: bool = True, *, request_id: str | None = None
    ) -> ScheduleInfo:
        """Puts a schedule online (it fires) or offline. FailedPrecondition (WORKFLOW_OFFLINE)
        to put online a schedule whose workflow is offline."""
        req = schedule_pb2.SetScheduleStateRequest(
            id=id, online=online, request_id=_rid(request_id)
        )
        return convert.schedule_from_proto(self._call(self._master.SetScheduleState, req).schedule)

    def preview_schedule(
        self, id: int = 0, *, cron: str = "", tz: str = "", count: int = 10
    ) -> list[datetime]:
        """The next ``count`` fire times of a stored schedule, or of a cron."""
        req = schedule_pb2.PreviewScheduleRequest(id=id, cron=cron, time_zone=tz, count=count)
        resp = self._call(self._master.PreviewSchedule, req)
        return [t.ToDatetime(tzinfo=UTC) for t in resp.fire_times]

    def put_schedule(self, project: str, workflow: str, schedule: Schedule) -> ScheduleInfo:
        """Makes ``schedule`` the workflow's schedule: updates the oldest one it has (creates
        one if none), then puts it online or offline as ``schedule.online`` says."""
        existing = sorted(
            self.list_schedules(project=project, workflow=workflow), key=lambda s: s.id
        )
        if existing:
            info = self.update_schedule(existing[0].id, project, workflow, schedule)
        else:
            info = self.create_schedule(project, workflow, schedule)
        if info.online != schedule.online:
            info = self.set_schedule_online(info.id, schedule.online)
        return info
