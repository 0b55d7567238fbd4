"""Records -> protos for the master's API (requests are decoded by ``dsched.convert``, shared with
the SDK, and by :mod:`dsched_server.api.validation`)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from google.protobuf import timestamp_pb2

from dsched.convert import (
    COMMAND_TYPE,
    FAILURE_STRATEGY,
    INSTANCE_EVENT_KIND,
    PRIORITY,
    RELEASE_STATE,
    RUN_TRIGGER,
    TASK_DEPEND_TYPE,
    TASK_STATE,
    WORKFLOW_STATE,
    workflow_spec_to_proto,
)
from dsched.v1 import resources_pb2
from dsched_server.core.records import (
    EventRecord,
    InstanceRecord,
    ProjectRecord,
    TaskInstanceRecord,
    WorkflowRecord,
    WorkflowVersionRecord,
)


def timestamp(value: datetime | None) -> timestamp_pb2.Timestamp | None:
    """What ``Timestamp.FromDatetime`` gives (a naive value is UTC), by exact integer arithmetic
    at a quarter of its cost: every instance, attempt and event an answer or a watch frame
    carries has a few (see also protocol.wire.checks.to_timestamp)."""
    if value is None:
        return None
    since = (value if value.tzinfo is not None else value.replace(tzinfo=UTC)) - _EPOCH
    return timestamp_pb2.Timestamp(
        seconds=since.days * 86400 + since.seconds, nanos=since.microseconds * 1000
    )


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def project(r: ProjectRecord) -> resources_pb2.Project:
    return resources_pb2.Project(
        name=r.name,
        description=r.description,
        create_time=timestamp(r.create_time),
        update_time=timestamp(r.update_time),
    )


def workflow(r: WorkflowRecord) -> resources_pb2.Workflow:
    msg = workflow_spec_to_proto(r.spec)
    msg.code = r.id
    msg.version = r.version
    msg.release_state = RELEASE_STATE.number(r.release_state)
    msg.create_time.FromDatetime(r.create_time)
    msg.update_time.FromDatetime(r.update_time)
    return msg


def workflow_version(r: WorkflowVersionRecord) -> resources_pb2.WorkflowVersion:
    return resources_pb2.WorkflowVersion(
        version=r.version,
        description=r.description,
        task_count=r.task_count,
        create_time=timestamp(r.create_time),
    )


def instance(r: InstanceRecord) -> resources_pb2.WorkflowInstance:
    return resources_pb2.WorkflowInstance(
        id=r.id,
        project=r.project,
        workflow=r.workflow,
        workflow_code=r.workflow_code,
        workflow_version=r.workflow_version,
        state=WORKFLOW_STATE.number(r.state),
        command_type=COMMAND_TYPE.number(r.command_type),
        params=dict(r.options.params),
        start_tasks=list(r.options.scope.start_tasks),
        task_depend_type=TASK_DEPEND_TYPE.number(r.options.scope.depend_type),
        failure_strategy=FAILURE_STRATEGY.number(r.options.failure_strategy),
        priority=PRIORITY.number(r.options.priority),
        worker_group=r.options.worker_group,
        dry_run=r.options.dry_run,
        host=r.host,
        run_times=r.run_times,
        submit_time=timestamp(r.submit_time),
        start_time=timestamp(r.start_time),
        end_time=timestamp(r.end_time),
        state_reason=r.state_reason,
        var_pool=dict(r.var_pool),
        schedule_time=timestamp(r.schedule_time),
        time_zone=r.time_zone,
        trigger=RUN_TRIGGER.number(r.trigger),
        backfill_id=r.backfill_id or 0,
        schedule_id=r.schedule_id or 0,
    )


def task_instance(r: TaskInstanceRecord) -> resources_pb2.TaskInstance:
    return resources_pb2.TaskInstance(
        id=r.id,
        workflow_instance_id=r.workflow_instance_id,
        task_name=r.task_name,
        attempt=r.attempt,
        retry_times=r.retry_times,
        state=TASK_STATE.number(r.state),
        valid=r.valid,
        host=r.host,
        pid=r.pid,
        log_path=r.log_path,
        exit_code=r.exit_code,
        submit_time=timestamp(r.submit_time),
        start_time=timestamp(r.start_time),
        end_time=timestamp(r.end_time),
        out_params=dict(r.out_params),
        priority=PRIORITY.number(r.priority),
        worker_group=r.worker_group,
        state_reason=r.state_reason,
        application_id=r.application_id,
    )


def event(r: EventRecord) -> resources_pb2.InstanceEvent:
    return resources_pb2.InstanceEvent(
        sequence=r.sequence,
        workflow_instance_id=r.workflow_instance_id,
        task_instance_id=r.task_instance_id,
        task_name=r.task_name,
        workflow_state=WORKFLOW_STATE.number(r.workflow_state) if r.workflow_state else None,
        task_state=TASK_STATE.number(r.task_state) if r.task_state else None,
        kind=INSTANCE_EVENT_KIND.number(r.kind),
        message=r.message,
        create_time=timestamp(r.create_time),
    )


def events(records: Iterable[EventRecord]) -> list[resources_pb2.InstanceEvent]:
    return [event(r) for r in records]
