"""Client calls for runs: starting and controlling workflow instances, their task instances,
their event streams, and task logs."""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from datetime import datetime, timedelta
from typing import Any

from dsched import coerce, convert
from dsched.errors import ControlPending, InvalidArgument, Unavailable
from dsched.names import reason_for
from dsched.options import FailureStrategy, Priority, TaskDependType
from dsched.results import InstanceEvent, LogChunk, Page, TaskInstance, WatchFrame, WorkflowInstance
from dsched.rpc import RpcBase, iter_pages
from dsched.rpc import request_id as _rid
from dsched.spec import params_size_violation, params_violations
from dsched.states import WorkflowState
from dsched.streams import resume
from dsched.v1 import enums_pb2, log_service_pb2, master_service_pb2


def _instance(resp: Any) -> WorkflowInstance:
    return convert.instance_from_proto(resp.instance)


def _applied(action: str, request_id: str, resp: Any) -> WorkflowInstance:
    """The instance of a pause or stop answer; ControlPending if the control is still pending."""
    instance = _instance(resp)
    if resp.status == enums_pb2.CONTROL_STATUS_PENDING:
        raise ControlPending(
            f"the {action} of instance {instance.id} is recorded but not applied yet (the "
            f"instance is {instance.state}): the master driving it applies it once it can; "
            "call again with the same request_id to wait, or watch the instance",
            instance=instance,
            request_id=request_id,
        )
    return instance


def _looks_terminal(frame: WatchFrame) -> bool:
    """Whether a frame may mark the end: a terminal workflow event, or a progress frame (the
    history is fully delivered) in a terminal state. Only a state that comes with the events
    counts, so that ``on_event`` callers see every event before the wait returns."""
    if not frame.events:
        return frame.state is not None and frame.state.terminal
    states = [e.workflow_state for e in frame.events if e.workflow_state is not None]
    return bool(states) and states[-1].terminal


class InstanceCalls(RpcBase):
    """Workflow instances, task instances, watches and logs; part of :class:`dsched.Client`."""

    def start_workflow(
        self,
        project: str,
        workflow: str,
        *,
        params: Mapping[str, object] | None = None,
        start_tasks: Iterable[str] = (),
        task_depend_type: TaskDependType | str | None = None,
        failure_strategy: FailureStrategy | str | None = None,
        priority: Priority | str | None = None,
        worker_group: str = "",
        dry_run: bool = False,
        request_id: str | None = None,
        dispatch_timeout: timedelta | float | None = None,
        schedule_time: datetime | None = None,
        time_zone: str = "",
    ) -> WorkflowInstance:
        """Starts a run of an ONLINE workflow; returns the new instance (SUBMITTED).

        ``schedule_time`` (an aware datetime) is what the run's time parameters count from
        (``$[yyyyMMdd-1]``, ``system.biz.date``), read in ``time_zone`` (IANA; default UTC);
        None: now.

        ``dispatch_timeout`` (a timedelta or seconds) bounds how long a task may wait for a
        worker of its group; then it fails saying why it waited. None: the master's default;
        0: no limit.

        Options left as None take the server's defaults (TASK_POST, CONTINUE, MEDIUM).

        Raises:
            FailedPrecondition: the workflow is OFFLINE.
            NotFound: the project or the workflow does not exist.
            InvalidArgument: an option or parameter is invalid (enum names and parameters are
                checked here before any call, parameters by the same rules as the server's).
        """
        start_params = coerce.params(params)
        violations = params_violations("params", start_params)
        too_large = params_size_violation("params", [start_params])
        if too_large is not None:
            violations.append(too_large)
        if violations:
            raise InvalidArgument(
                "invalid start parameters",
                reason=reason_for(
                    violations, "INVALID_ARGUMENT" if too_large is None else "REQUEST_TOO_LARGE"
                ),
                violations=violations,
            )
        depend = coerce.optional_enum(TaskDependType, task_depend_type, "task_depend_type")
        failure = coerce.optional_enum(FailureStrategy, failure_strategy, "failure_strategy")
        prio = coerce.optional_enum(Priority, priority, "priority")
        req = master_service_pb2.StartWorkflowRequest(
            project=project,
            workflow=workflow,
            params=start_params,
            start_tasks=list(start_tasks),
            worker_group=worker_group,
            dry_run=dry_run,
            request_id=_rid(request_id),
        )
        if depend is not None:
            req.task_depend_type = convert.TASK_DEPEND_TYPE.number(depend)
        if failure is not None:
            req.failure_strategy = convert.FAILURE_STRATEGY.number(failure)
        if prio is not None:
            req.priority = convert.PRIORITY.number(prio)
        if dispatch_timeout is not None:
            seconds = (
                dispatch_timeout.total_seconds()
                if isinstance(dispatch_timeout, timedelta)
                else float(dispatch_timeout)
            )
            req.dispatch_timeout.FromTimedelta(timedelta(seconds=seconds))
        if schedule_time is not None:
            req.schedule_time.FromDatetime(coerce.aware(schedule_time, "schedule_time"))
        req.time_zone = time_zone
        return _instance(self._call(self._master.StartWorkflow, req))

    def pause_instance(self, id: int, *, request_id: str | None = None) -> WorkflowInstance:
        """Pauses a RUNNING instance: READY_PAUSE, then PAUSED once running tasks finish. Any
        master accepts it; returns the instance once the master driving it applied the pause.

        Raises:
            ControlPending: recorded, but not applied within the call's timeout (it still will
                be); call again with its ``request_id`` to wait again.
            FailedPrecondition: the instance is not RUNNING (or a pause or stop is under way).
        """
        rid = _rid(request_id)
        req = master_service_pb2.PauseWorkflowInstanceRequest(id=id, request_id=rid)
        return _applied("pause", rid, self._call(self._master.PauseWorkflowInstance, req))

    def stop_instance(self, id: int, *, request_id: str | None = None) -> WorkflowInstance:
        """Stops an unfinished instance, killing its running tasks; queued tasks never start.
        Any master accepts it; returns the instance once the stop is applied (READY_STOP, or
        STOPPED).

        Raises:
            ControlPending: recorded, but not applied within the call's timeout (it still will
                be); call again with its ``request_id`` to wait again.
            FailedPrecondition: the instance is finished.
        """
        rid = _rid(request_id)
        req = master_service_pb2.StopWorkflowInstanceRequest(id=id, request_id=rid)
        return _applied("stop", rid, self._call(self._master.StopWorkflowInstance, req))

    def resume_instance(self, id: int, *, request_id: str | None = None) -> WorkflowInstance:
        """Resumes a PAUSED instance where it left off."""
        req = master_service_pb2.ResumeWorkflowInstanceRequest(id=id, request_id=_rid(request_id))
        return _instance(self._call(self._master.ResumeWorkflowInstance, req))

    def rerun_instance(self, id: int, *, request_id: str | None = None) -> WorkflowInstance:
        """Runs a finished instance again from the start."""
        req = master_service_pb2.RerunWorkflowInstanceRequest(id=id, request_id=_rid(request_id))
        return _instance(self._call(self._master.RerunWorkflowInstance, req))

    def recover_failed_instance(
        self, id: int, *, request_id: str | None = None
    ) -> WorkflowInstance:
        """Re-runs the failed and killed tasks of a FAILED or STOPPED instance."""
        req = master_service_pb2.RecoverFailedWorkflowInstanceRequest(
            id=id, request_id=_rid(request_id)
        )
        return _instance(self._call(self._master.RecoverFailedWorkflowInstance, req))

    def execute_from_task(
        self,
        id: int,
        start_tasks: Iterable[str],
        *,
        task_depend_type: TaskDependType | str | None = None,
        request_id: str | None = None,
    ) -> WorkflowInstance:
        """Runs a finished instance again from ``start_tasks`` (and their downstream by default)."""
        depend = coerce.optional_enum(TaskDependType, task_depend_type, "task_depend_type")
        req = master_service_pb2.ExecuteFromTaskRequest(
            id=id, start_tasks=list(start_tasks), request_id=_rid(request_id)
        )
        if depend is not None:
            req.task_depend_type = convert.TASK_DEPEND_TYPE.number(depend)
        return _instance(self._call(self._master.ExecuteFromTask, req))

    def get_instance(self, id: int) -> WorkflowInstance:
        """Returns a workflow instance. Raises NotFound if there is none with this id."""
        req = master_service_pb2.GetWorkflowInstanceRequest(id=id)
        return _instance(self._call(self._master.GetWorkflowInstance, req))

    def list_instances(
        self,
        *,
        project: str = "",
        workflow: str = "",
        states: Iterable[WorkflowState | str] = (),
        submitted_after: datetime | None = None,
        page_size: int = 0,
        page_token: str = "",
    ) -> Page[WorkflowInstance]:
        """Returns one page of instances, newest first, filtered by the arguments given."""
        req = master_service_pb2.ListWorkflowInstancesRequest(
            project=project, workflow=workflow, page_size=page_size, page_token=page_token
        )
        for state in states:
            member = coerce.enum_value(WorkflowState, state, "states")
            req.states.append(convert.WORKFLOW_STATE.number(member))
        if submitted_after is not None:
            req.submitted_after.FromDatetime(submitted_after)
        resp = self._call(self._master.ListWorkflowInstances, req)
        items = tuple(map(convert.instance_from_proto, resp.instances))
        return Page(items, resp.next_page_token)

    def iter_instances(
        self,
        *,
        project: str = "",
        workflow: str = "",
        states: Iterable[WorkflowState | str] = (),
        submitted_after: datetime | None = None,
        page_size: int = 0,
    ) -> Iterator[WorkflowInstance]:
        """Yields every matching instance, newest first, fetching pages as the caller goes."""
        wanted = tuple(states)

        def fetch(token: str) -> Page[WorkflowInstance]:
            return self.list_instances(
                project=project,
                workflow=workflow,
                states=wanted,
                submitted_after=submitted_after,
                page_size=page_size,
                page_token=token,
            )

        return iter_pages(fetch)

    def get_task_instance(self, id: int) -> TaskInstance:
        """Returns a task instance. Raises NotFound if there is none with this id."""
        req = master_service_pb2.GetTaskInstanceRequest(id=id)
        resp = self._call(self._master.GetTaskInstance, req)
        return convert.task_instance_from_proto(resp.task_instance)

    def list_task_instances(
        self,
        workflow_instance_id: int,
        *,
        include_superseded: bool = False,
        page_size: int = 0,
        page_token: str = "",
    ) -> Page[TaskInstance]:
        """Returns one page of an instance's task instances in creation order."""
        req = master_service_pb2.ListTaskInstancesRequest(
            workflow_instance_id=workflow_instance_id,
            include_superseded=include_superseded,
            page_size=page_size,
            page_token=page_token,
        )
        resp = self._call(self._master.ListTaskInstances, req)
        items = tuple(map(convert.task_instance_from_proto, resp.task_instances))
        return Page(items, resp.next_page_token)

    def iter_task_instances(
        self, workflow_instance_id: int, *, include_superseded: bool = False, page_size: int = 0
    ) -> Iterator[TaskInstance]:
        """Yields every task instance of a workflow instance, fetching pages as needed."""
        return iter_pages(
            lambda token: self.list_task_instances(
                workflow_instance_id,
                include_superseded=include_superseded,
                page_size=page_size,
                page_token=token,
            )
        )

    def force_task_success(
        self, id: int, *, request_id: str | None = None
    ) -> tuple[TaskInstance, WorkflowInstance]:
        """Marks a FAILED or KILLED task instance of a finished instance FORCED_SUCCESS.

        Returns:
            The task instance and its workflow instance after the change.
        """
        req = master_service_pb2.ForceTaskInstanceSuccessRequest(id=id, request_id=_rid(request_id))
        resp = self._call(self._master.ForceTaskInstanceSuccess, req)
        return convert.task_instance_from_proto(resp.task_instance), _instance(resp)

    # ------------------------------------------------------------------------------- streams

    def watch_frames(
        self,
        id: int,
        *,
        after_sequence: int = 0,
        keep_open: bool = False,
        deadline: float | None = None,
        state_only: bool = False,
    ) -> Generator[WatchFrame, None, None]:
        """Yields the frames of an instance's event stream, progress frames included. Resumed at
        the cursor of a finished instance, it yields one frame without events that carries the
        final state. ``state_only``: frames carry no events, one comes each time the state
        changes (the cursor stays ``after_sequence``).

        The stream reopens from the last cursor if it breaks with UNAVAILABLE (see
        :mod:`dsched.streams`). ``deadline`` is a :func:`time.monotonic` instant (TimeoutError).
        """

        def open_call(cursor: int, timeout: float | None) -> Any:
            req = master_service_pb2.WatchWorkflowInstanceRequest(
                id=id, after_sequence=cursor, keep_open=keep_open, state_only=state_only
            )
            return self._master.WatchWorkflowInstance(req, timeout=timeout)

        frames = resume(
            open_call,
            after_sequence,
            lambda r: r.cursor,
            reconnect=self.reconnect,
            deadline=deadline,
            target=self.target,
        )
        for response in frames:
            yield convert.watch_frame_from_proto(response)

    def watch_instance(
        self, id: int, *, after_sequence: int = 0, keep_open: bool = False
    ) -> Iterator[InstanceEvent]:
        """Yields an instance's events after ``after_sequence`` (0: its whole history), then new
        ones as they happen. Ends after the event that makes the instance terminal unless
        ``keep_open``; survives dropped connections like :meth:`watch_frames`."""
        for frame in self.watch_frames(id, after_sequence=after_sequence, keep_open=keep_open):
            yield from frame.events

    def wait(
        self,
        id: int,
        *,
        timeout: float | None = None,
        on_event: Callable[[InstanceEvent], None] | None = None,
    ) -> WorkflowInstance:
        """Blocks until the instance is terminal and returns it, driven by the watch stream.

        Args:
            id: the workflow instance.
            timeout: seconds to wait at most (None: no limit); then :class:`TimeoutError`.
            on_event: called with each event (history first, then live), in sequence order.

        A terminal state seen on the stream is confirmed with GetWorkflowInstance: an instance
        that was rerun or recovered replays its old terminal events first. Without ``on_event``
        the stream carries only state changes (no events are read, sent or decoded).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        cursor = 0
        empty_streams = self.reconnect.delays()
        while True:
            progressed = False
            frames = self.watch_frames(
                id,
                after_sequence=cursor,
                keep_open=True,
                deadline=deadline,
                state_only=on_event is None,
            )
            for frame in frames:
                progressed = True
                cursor = max(cursor, frame.cursor)
                for event in frame.events:
                    if on_event is not None:
                        on_event(event)
                if _looks_terminal(frame):
                    instance = self.get_instance(id)
                    if instance.terminal:
                        frames.close()
                        return instance
            if progressed:
                empty_streams = self.reconnect.delays()  # only consecutive empty streams count
            else:
                # The server ended a keep_open stream without a frame: back off before reopening.
                delay = next(empty_streams, None)
                if delay is None:
                    raise Unavailable(f"the event stream of instance {id} keeps ending at once")
                time.sleep(delay)

    def read_log(self, task_instance_id: int, offset: int = 0, length: int = 0) -> LogChunk:
        """Reads up to ``length`` bytes (0: 1 MiB) of a task log from ``offset``.

        Raises NotFound if the log does not exist (yet).
        """
        req = log_service_pb2.ReadTaskLogRequest(
            task_instance_id=task_instance_id, offset=offset, length=length
        )
        return convert.log_chunk_from_proto(self._call(self._logs.ReadTaskLog, req))

    def tail_log(
        self, task_instance_id: int, offset: int = 0, follow: bool = False
    ) -> Iterator[LogChunk]:
        """Yields a task log in chunks from ``offset``; progress frames are skipped.

        With ``follow``, new bytes arrive as they are written until the task instance is
        terminal, and the last chunk has ``end_of_log`` set. A dropped connection resumes from
        the last offset.
        """

        def open_call(cursor: int, timeout: float | None) -> Any:
            req = log_service_pb2.TailTaskLogRequest(
                task_instance_id=task_instance_id, offset=cursor, follow=follow
            )
            return self._logs.TailTaskLog(req, timeout=timeout)

        chunks = resume(
            open_call, offset, lambda r: r.next_offset, reconnect=self.reconnect, target=self.target
        )
        for response in chunks:
            if response.data or response.end_of_log:
                yield convert.log_chunk_from_proto(response)
