"""Client calls for backfills: runs of a workflow for past schedule times, as one object."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime

from dsched import coerce, convert
from dsched.options import (
    BackfillFailure,
    BackfillOrder,
    BackfillReprocess,
    BackfillState,
    FailureStrategy,
    Priority,
)
from dsched.results import Backfill, Page
from dsched.rpc import RpcBase, iter_pages
from dsched.rpc import request_id as _rid
from dsched.v1 import backfill_pb2


class BackfillCalls(RpcBase):
    """Backfills; part of :class:`dsched.Client`."""

    def create_backfill(
        self,
        project: str,
        workflow: str,
        *,
        start: datetime | None = None,
        end: datetime | None = None,
        dates: Iterable[datetime] = (),
        cron: str = "",
        time_zone: str = "",
        parallelism: int = 1,
        order: BackfillOrder | str = BackfillOrder.ASCENDING,
        reprocess: BackfillReprocess | str = BackfillReprocess.ALL,
        on_failure: BackfillFailure | str = BackfillFailure.CONTINUE,
        failure_strategy: FailureStrategy | str | None = None,
        priority: Priority | str | None = None,
        worker_group: str = "",
        params: Mapping[str, object] | None = None,
        request_id: str | None = None,
    ) -> Backfill:
        """Starts a backfill of an ONLINE workflow over ``start``..``end`` (both inclusive, the
        fire times of ``cron``: by default the workflow's daily midnight) or over ``dates``;
        ``parallelism`` runs at a time. Aware datetimes only. Returns it RUNNING.

        Raises:
            InvalidArgument: nothing to run or over 1,000 dates, a bad cron or time zone, end
                before start, parallelism outside 1-32 (nothing is stored).
            FailedPrecondition: the workflow is OFFLINE.
        """
        req = backfill_pb2.CreateBackfillRequest(
            project=project,
            workflow=workflow,
            cron=cron,
            time_zone=time_zone,
            parallelism=parallelism,
            order=convert.BACKFILL_ORDER.number(coerce.enum_value(BackfillOrder, order, "order")),
            reprocess=convert.BACKFILL_REPROCESS.number(
                coerce.enum_value(BackfillReprocess, reprocess, "reprocess")
            ),
            on_failure=convert.BACKFILL_FAILURE.number(
                coerce.enum_value(BackfillFailure, on_failure, "on_failure")
            ),
            worker_group=worker_group,
            params=coerce.params(params),
            request_id=_rid(request_id),
        )
        if start is not None:
            req.start_time.FromDatetime(coerce.aware(start, "start"))
        if end is not None:
            req.end_time.FromDatetime(coerce.aware(end, "end"))
        for when in dates:
            req.dates.add().FromDatetime(coerce.aware(when, "dates"))
        failure = coerce.optional_enum(FailureStrategy, failure_strategy, "failure_strategy")
        if failure is not None:
            req.failure_strategy = convert.FAILURE_STRATEGY.number(failure)
        prio = coerce.optional_enum(Priority, priority, "priority")
        if prio is not None:
            req.priority = convert.PRIORITY.number(prio)
        resp = self._call(self._master.CreateBackfill, req)
        return convert.backfill_from_proto(resp.backfill)

    def get_backfill(self, id: int) -> Backfill:
        """The backfill with its dates and progress."""
        resp = self._call(self._master.GetBackfill, backfill_pb2.GetBackfillRequest(id=id))
        return convert.backfill_from_proto(resp.backfill)

    def list_backfills(
        self,
        *,
        project: str = "",
        workflow: str = "",
        states: Iterable[BackfillState | str] = (),
    ) -> Iterator[Backfill]:
        """Backfills, newest first (without their dates), fetched page by page."""
        wanted = [
            convert.BACKFILL_STATE.number(coerce.enum_value(BackfillState, s, "states"))
            for s in states
        ]

        def page(token: str) -> Page[Backfill]:
            req = backfill_pb2.ListBackfillsRequest(
                project=project, workflow=workflow, states=wanted, page_size=200, page_token=token
            )
            resp = self._call(self._master.ListBackfills, req)
            items = tuple(convert.backfill_from_proto(b) for b in resp.backfills)
            return Page(items, resp.next_page_token)

        return iter_pages(page)

    def pause_backfill(self, id: int, *, request_id: str | None = None) -> Backfill:
        """Starts no new run (those under way go on). FailedPrecondition unless RUNNING."""
        req = backfill_pb2.PauseBackfillRequest(id=id, request_id=_rid(request_id))
        return convert.backfill_from_proto(self._call(self._master.PauseBackfill, req).backfill)

    def resume_backfill(self, id: int, *, request_id: str | None = None) -> Backfill:
        """Carries a PAUSED backfill on. FailedPrecondition unless PAUSED."""
        req = backfill_pb2.ResumeBackfillRequest(id=id, request_id=_rid(request_id))
        return convert.backfill_from_proto(self._call(self._master.ResumeBackfill, req).backfill)

    def cancel_backfill(self, id: int, *, request_id: str | None = None) -> Backfill:
        """Skips the dates not started and stops the runs under way."""
        req = backfill_pb2.CancelBackfillRequest(id=id, request_id=_rid(request_id))
        return convert.backfill_from_proto(self._call(self._master.CancelBackfill, req).backfill)
