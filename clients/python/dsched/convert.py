"""The one seam between dsched's plain values and the ``dsched.v1`` protobuf messages.

Two directions with different contracts:

* Definitions (:func:`workflow_spec_to_proto`, :func:`workflow_spec_from_proto`) are shared with
  the server, which decodes whatever a client sends. Decoding therefore never raises: values that
  cannot be represented in a :class:`~dsched.spec.WorkflowSpec` (unknown enum numbers, malformed or
  negative durations) become :class:`~dsched.errors.FieldViolation` s with proto field paths, and
  the spec gets the field's default in their place so that a later
  :func:`~dsched.spec.validate_workflow` does not report them twice.
* Results (``*_from_proto``) decode server responses for the SDK. ``UNSPECIFIED`` options decode
  to the server's documented default; a state number this SDK does not know raises
  :class:`~dsched.errors.Internal` (reason ``UNKNOWN_ENUM_VALUE``): the peer is newer.

Option and state values are the proto enum names without their prefix, so the tables below are
derived from the enums themselves rather than written out.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import TypeVar, overload

from google.protobuf import timestamp_pb2
from google.protobuf.message import Message

from dsched import convert_kinds
from dsched.dependency import (
    DEFAULT_CHECK_INTERVAL,
    Cycle,
    DependencyFailure,
    DependencyGroup,
    DependencyItem,
    DependentSpec,
    Relation,
)
from dsched.errors import FieldViolation, Internal
from dsched.options import (
    BackfillFailure,
    BackfillOrder,
    BackfillReprocess,
    BackfillState,
    CatchUp,
    CommandType,
    FailureStrategy,
    HistoryKind,
    Overlap,
    Priority,
    ReleaseState,
    RunTrigger,
    TaskDependType,
    TimeoutStrategy,
)
from dsched.proto_fields import EnumMap as EnumMap
from dsched.proto_fields import duration as _duration
from dsched.proto_fields import option as _option
from dsched.results import (
    Backfill,
    BackfillProgress,
    ClusterMember,
    HistoryTally,
    InstanceEvent,
    LogChunk,
    Project,
    ScheduleInfo,
    ServerInfo,
    ServerRole,
    ServerStatus,
    TaskInstance,
    WatchFrame,
    WorkflowInfo,
    WorkflowInstance,
    WorkflowVersionInfo,
)
from dsched.spark import DeployMode, SparkProgram, SparkSpec
from dsched.spec import ShellSpec, TaskKind, TaskSpec, WorkflowSpec
from dsched.sql import ProcedureSpec, SqlSpec
from dsched.sql_convert import (
    procedure_from_proto,
    procedure_to_proto,
    sql_from_proto,
    sql_to_proto,
)
from dsched.states import InstanceEventKind, TaskState, WorkflowState
from dsched.v1 import (
    backfill_pb2,
    dependent_pb2,
    enums_pb2,
    log_service_pb2,
    master_service_pb2,
    resources_pb2,
    schedule_pb2,
    spark_pb2,
)

E = TypeVar("E", bound=StrEnum)

PRIORITY = EnumMap(Priority, enums_pb2.Priority, "PRIORITY_")
TIMEOUT_STRATEGY = EnumMap(TimeoutStrategy, enums_pb2.TimeoutStrategy, "TIMEOUT_STRATEGY_")
FAILURE_STRATEGY = EnumMap(FailureStrategy, enums_pb2.FailureStrategy, "FAILURE_STRATEGY_")
TASK_DEPEND_TYPE = EnumMap(TaskDependType, enums_pb2.TaskDependType, "TASK_DEPEND_TYPE_")
RELEASE_STATE = EnumMap(ReleaseState, enums_pb2.ReleaseState, "RELEASE_STATE_")
COMMAND_TYPE = EnumMap(CommandType, enums_pb2.CommandType, "COMMAND_TYPE_")
WORKFLOW_STATE = EnumMap(WorkflowState, enums_pb2.WorkflowInstanceState, "WORKFLOW_INSTANCE_STATE_")
TASK_STATE = EnumMap(TaskState, enums_pb2.TaskInstanceState, "TASK_INSTANCE_STATE_")
SERVER_ROLE = EnumMap(ServerRole, enums_pb2.ServerRole, "SERVER_ROLE_")
SERVER_STATUS = EnumMap(ServerStatus, enums_pb2.ServerStatus, "SERVER_STATUS_")
INSTANCE_EVENT_KIND = EnumMap(
    InstanceEventKind, enums_pb2.InstanceEventKind, "INSTANCE_EVENT_KIND_"
)
HISTORY_KIND = EnumMap(HistoryKind, enums_pb2.HistoryKind, "HISTORY_KIND_")
RUN_TRIGGER = EnumMap(RunTrigger, enums_pb2.RunTrigger, "RUN_TRIGGER_")
BACKFILL_STATE = EnumMap(BackfillState, backfill_pb2.BackfillState, "BACKFILL_STATE_")
BACKFILL_ORDER = EnumMap(BackfillOrder, backfill_pb2.BackfillOrder, "BACKFILL_ORDER_")
SPARK_PROGRAM = EnumMap(SparkProgram, spark_pb2.SparkProgramType, "SPARK_PROGRAM_TYPE_")
SPARK_DEPLOY_MODE = EnumMap(DeployMode, spark_pb2.SparkDeployMode, "SPARK_DEPLOY_MODE_")
BACKFILL_REPROCESS = EnumMap(
    BackfillReprocess, backfill_pb2.BackfillReprocess, "BACKFILL_REPROCESS_"
)
BACKFILL_FAILURE = EnumMap(BackfillFailure, backfill_pb2.BackfillFailure, "BACKFILL_FAILURE_")
CATCH_UP = EnumMap(CatchUp, schedule_pb2.ScheduleCatchUp, "SCHEDULE_CATCH_UP_")
OVERLAP = EnumMap(Overlap, schedule_pb2.ScheduleOverlap, "SCHEDULE_OVERLAP_")
DEPENDENCY_CYCLE = EnumMap(Cycle, dependent_pb2.DependencyCycle, "DEPENDENCY_CYCLE_")
DEPENDENCY_RELATION = EnumMap(Relation, dependent_pb2.DependencyRelation, "DEPENDENCY_RELATION_")
DEPENDENCY_FAILURE = EnumMap(
    DependencyFailure, dependent_pb2.DependencyFailure, "DEPENDENCY_FAILURE_"
)
_EnumMap = EnumMap  # the name dsched_server/api/validation.py imports; drop once it uses EnumMap


@overload
def _member(table: EnumMap, kind: type[E], number: int, default: E) -> E: ...
@overload
def _member(table: EnumMap, kind: type[E], number: int, default: None) -> E | None: ...
def _member(table: EnumMap, kind: type[E], number: int, default: E | None) -> E | None:
    """Decodes a response enum: 0 -> ``default``; unknown -> Internal (the server is newer)."""
    if number == 0:
        return default
    member = table.by_number.get(number)
    if member is None:
        raise Internal(
            f"the server sent {table.prefix}{number}, which this SDK does not know; upgrade dsched",
            reason="UNKNOWN_ENUM_VALUE",
            metadata={"enum": table.prefix.rstrip("_"), "number": str(number)},
        )
    return kind(member.value)


def _required(table: EnumMap, kind: type[E], number: int) -> E:
    member = _member(table, kind, number, None)
    if member is None:
        raise Internal(
            f"the server sent no {table.prefix.rstrip('_')}", reason="UNKNOWN_ENUM_VALUE"
        )
    return member


def _time(msg: Message, name: str) -> datetime | None:
    """Returns the Timestamp field ``name`` of ``msg`` as an aware UTC datetime (None if unset)."""
    if not msg.HasField(name):
        return None
    stamp: timestamp_pb2.Timestamp = getattr(msg, name)
    return stamp.ToDatetime(tzinfo=UTC)


def task_spec_to_proto(task: TaskSpec) -> resources_pb2.TaskDefinition:
    """Encodes one task; zero durations are left unset (the proto's "no value")."""
    msg = resources_pb2.TaskDefinition(
        name=task.name,
        description=task.description,
        upstream_tasks=list(task.upstream),
        priority=PRIORITY.name(task.priority),
        worker_group=task.worker_group,
        retries=task.retries,
        timeout_strategy=TIMEOUT_STRATEGY.name(task.timeout_strategy),
        params=dict(task.params),
        disabled=task.disabled,
    )
    for name in ("retry_interval", "timeout", "delay"):
        value: timedelta = getattr(task, name)
        if value:
            getattr(msg, name).FromTimedelta(value)
    if isinstance(task.kind, ShellSpec):
        msg.shell.script = task.kind.script
    elif isinstance(task.kind, DependentSpec):
        msg.dependent.CopyFrom(dependent_to_proto(task.kind))
    elif isinstance(task.kind, SparkSpec):
        msg.spark.CopyFrom(spark_to_proto(task.kind))
    elif isinstance(task.kind, SqlSpec):
        msg.sql.CopyFrom(sql_to_proto(task.kind))
    elif isinstance(task.kind, ProcedureSpec):
        msg.procedure.CopyFrom(procedure_to_proto(task.kind))
    else:
        convert_kinds.kind_into(msg, task.kind)
    return msg


# The SparkTask fields that mean the same, under the same name and type, in the value.
_SPARK_SAME = (
    "script",
    "main_file",
    "main_class",
    "driver_cores",
    "driver_memory",
    "executor_cores",
    "executor_memory",
    "num_executors",
    "app_name",
)


def spark_to_proto(spec: SparkSpec) -> spark_pb2.SparkTask:
    """Encodes a SPARK task (the master URL as written: empty stays empty)."""
    return spark_pb2.SparkTask(
        **{name: getattr(spec, name) for name in _SPARK_SAME},
        program_type=SPARK_PROGRAM.name(spec.program_type),
        master=spec.master,
        deploy_mode=SPARK_DEPLOY_MODE.name(spec.deploy_mode),
        conf=dict(spec.conf),
        py_files=list(spec.py_files),
        files=list(spec.files),
        args=list(spec.args),
    )


def spark_from_proto(msg: spark_pb2.SparkTask, path: str, out: list[FieldViolation]) -> SparkSpec:
    """Decodes a SPARK task without raising (an unknown or missing enum is reported here; the
    rest is :func:`dsched.spark.spark_violations`'s)."""
    program = _option(
        SPARK_PROGRAM,
        SparkProgram,
        msg.program_type,
        SparkProgram.PYSPARK,
        f"{path}.program_type",
        out,
    )
    if msg.program_type == 0:
        out.append(FieldViolation(f"{path}.program_type", "PYSPARK, SQL or JAR is required"))
    return SparkSpec(
        **{name: getattr(msg, name) for name in _SPARK_SAME},
        program_type=program,
        master=msg.master,
        deploy_mode=_option(
            SPARK_DEPLOY_MODE,
            DeployMode,
            msg.deploy_mode,
            DeployMode.CLIENT,
            f"{path}.deploy_mode",
            out,
        ),
        conf=dict(msg.conf),
        py_files=tuple(msg.py_files),
        files=tuple(msg.files),
        args=tuple(msg.args),
    )


def dependent_to_proto(spec: DependentSpec) -> dependent_pb2.DependentTask:
    msg = dependent_pb2.DependentTask(
        relation=DEPENDENCY_RELATION.name(spec.relation),
        on_failure=DEPENDENCY_FAILURE.name(spec.on_failure),
        groups=[
            dependent_pb2.DependencyGroup(
                relation=DEPENDENCY_RELATION.name(group.relation),
                items=[
                    dependent_pb2.DependencyItem(
                        project=item.project,
                        workflow=item.workflow,
                        task=item.task,
                        cycle=DEPENDENCY_CYCLE.name(item.cycle),
                        date_value=item.date_value,
                    )
                    for item in group.items
                ],
            )
            for group in spec.groups
        ],
    )
    if spec.failure_wait:
        msg.failure_wait.FromTimedelta(spec.failure_wait)
    msg.check_interval.FromTimedelta(spec.check_interval)
    return msg


def workflow_spec_to_proto(spec: WorkflowSpec) -> resources_pb2.Workflow:
    """Encodes a definition for CreateWorkflow/UpdateWorkflow (no code, version, release state)."""
    return resources_pb2.Workflow(
        project=spec.project,
        name=spec.name,
        description=spec.description,
        tasks=[task_spec_to_proto(t) for t in spec.tasks],
        params=dict(spec.params),
    )


def task_spec_from_proto(
    msg: resources_pb2.TaskDefinition, path: str, out: list[FieldViolation]
) -> TaskSpec:
    """Decodes one task, appending conversion problems to ``out`` (see the module docstring)."""
    which = msg.WhichOneof("kind")
    kind: TaskKind | None = None
    if which == "shell":
        kind = ShellSpec(script=msg.shell.script)
    elif which == "dependent":
        kind = dependent_from_proto(msg.dependent, f"{path}.dependent", out)
    elif which == "spark":
        kind = spark_from_proto(msg.spark, f"{path}.spark", out)
    elif which == "sql":
        kind = sql_from_proto(msg.sql, f"{path}.sql", out)
    elif which == "procedure":
        kind = procedure_from_proto(msg.procedure, f"{path}.procedure", out)
    else:
        kind = convert_kinds.kind_from(msg, which, path, out)
    return TaskSpec(
        name=msg.name,
        kind=kind,
        description=msg.description,
        upstream=tuple(msg.upstream_tasks),
        priority=_option(
            PRIORITY, Priority, msg.priority, Priority.MEDIUM, f"{path}.priority", out
        ),
        worker_group=msg.worker_group,
        retries=msg.retries,
        retry_interval=_duration(msg, "retry_interval", f"{path}.retry_interval", out),
        timeout=_duration(msg, "timeout", f"{path}.timeout", out),
        timeout_strategy=_option(
            TIMEOUT_STRATEGY,
            TimeoutStrategy,
            msg.timeout_strategy,
            TimeoutStrategy.FAIL,
            f"{path}.timeout_strategy",
            out,
        ),
        delay=_duration(msg, "delay", f"{path}.delay", out),
        params=dict(msg.params),
        disabled=msg.disabled,
    )


def dependent_from_proto(
    msg: dependent_pb2.DependentTask, path: str, out: list[FieldViolation]
) -> DependentSpec:
    """Decodes a DEPENDENT task without raising (an item without a cycle is reported here; the
    rest is :func:`dsched.dependency.dependent_violations`'s)."""
    groups = []
    for g, group in enumerate(msg.groups):
        items = []
        for i, item in enumerate(group.items):
            where = f"{path}.groups[{g}].items[{i}].cycle"
            cycle = _option(DEPENDENCY_CYCLE, Cycle, item.cycle, Cycle.DAY, where, out)
            if item.cycle == 0:
                out.append(FieldViolation(where, "a cycle (HOUR, DAY, WEEK, MONTH) is required"))
            items.append(
                DependencyItem(
                    project=item.project,
                    workflow=item.workflow,
                    task=item.task,
                    cycle=cycle,
                    date_value=item.date_value,
                )
            )
        relation = _relation(group.relation, f"{path}.groups[{g}].relation", out)
        groups.append(DependencyGroup(items=tuple(items), relation=relation))
    return DependentSpec(
        groups=tuple(groups),
        relation=_relation(msg.relation, f"{path}.relation", out),
        on_failure=_option(
            DEPENDENCY_FAILURE,
            DependencyFailure,
            msg.on_failure,
            DependencyFailure.FAIL,
            f"{path}.on_failure",
            out,
        ),
        failure_wait=_duration(msg, "failure_wait", f"{path}.failure_wait", out),
        check_interval=_duration(
            msg, "check_interval", f"{path}.check_interval", out, DEFAULT_CHECK_INTERVAL
        ),
    )


def _relation(number: int, path: str, out: list[FieldViolation]) -> Relation:
    return _option(DEPENDENCY_RELATION, Relation, number, Relation.AND, path, out)


def workflow_spec_from_proto(
    msg: resources_pb2.Workflow, path: str = "workflow"
) -> tuple[WorkflowSpec, list[FieldViolation]]:
    """Decodes a definition without raising; returns the spec and the conversion violations.

    A caller must reject the definition if the list is not empty, and otherwise still run
    :func:`dsched.spec.validate_workflow` (names, limits, the DAG). ``path`` prefixes the field
    paths; ``workflow`` matches the field of CreateWorkflowRequest and UpdateWorkflowRequest.
    """
    out: list[FieldViolation] = []
    tasks = tuple(
        task_spec_from_proto(t, f"{path}.tasks[{i}]", out) for i, t in enumerate(msg.tasks)
    )
    spec = WorkflowSpec(
        project=msg.project,
        name=msg.name,
        tasks=tasks,
        description=msg.description,
        params=dict(msg.params),
    )
    return spec, out


def project_from_proto(msg: resources_pb2.Project) -> Project:
    return Project(
        name=msg.name,
        description=msg.description,
        create_time=_time(msg, "create_time"),
        update_time=_time(msg, "update_time"),
    )


def workflow_info_from_proto(msg: resources_pb2.Workflow) -> WorkflowInfo:
    """Decodes a stored definition; the server validated it, so conversion problems are ignored."""
    spec, _ = workflow_spec_from_proto(msg)
    return WorkflowInfo(
        spec=spec,
        code=msg.code,
        version=msg.version,
        release_state=_member(RELEASE_STATE, ReleaseState, msg.release_state, ReleaseState.OFFLINE),
        create_time=_time(msg, "create_time"),
        update_time=_time(msg, "update_time"),
    )


def workflow_version_from_proto(msg: resources_pb2.WorkflowVersion) -> WorkflowVersionInfo:
    return WorkflowVersionInfo(
        version=msg.version,
        description=msg.description,
        task_count=msg.task_count,
        create_time=_time(msg, "create_time"),
    )


def instance_from_proto(msg: resources_pb2.WorkflowInstance) -> WorkflowInstance:
    return WorkflowInstance(
        id=msg.id,
        project=msg.project,
        workflow=msg.workflow,
        workflow_code=msg.workflow_code,
        workflow_version=msg.workflow_version,
        state=_required(WORKFLOW_STATE, WorkflowState, msg.state),
        command_type=_member(COMMAND_TYPE, CommandType, msg.command_type, None),
        params=dict(msg.params),
        start_tasks=tuple(msg.start_tasks),
        task_depend_type=_member(
            TASK_DEPEND_TYPE, TaskDependType, msg.task_depend_type, TaskDependType.TASK_POST
        ),
        failure_strategy=_member(
            FAILURE_STRATEGY, FailureStrategy, msg.failure_strategy, FailureStrategy.CONTINUE
        ),
        priority=_member(PRIORITY, Priority, msg.priority, Priority.MEDIUM),
        worker_group=msg.worker_group,
        dry_run=msg.dry_run,
        host=msg.host,
        run_times=msg.run_times,
        submit_time=_time(msg, "submit_time"),
        start_time=_time(msg, "start_time"),
        end_time=_time(msg, "end_time"),
        state_reason=msg.state_reason,
        var_pool=dict(msg.var_pool),
        schedule_time=_time(msg, "schedule_time"),
        time_zone=msg.time_zone or "UTC",
        trigger=_member(RUN_TRIGGER, RunTrigger, msg.trigger, RunTrigger.MANUAL),
        backfill_id=msg.backfill_id or None,
        schedule_id=msg.schedule_id or None,
    )


def task_instance_from_proto(msg: resources_pb2.TaskInstance) -> TaskInstance:
    return TaskInstance(
        id=msg.id,
        workflow_instance_id=msg.workflow_instance_id,
        task_name=msg.task_name,
        attempt=msg.attempt,
        retry_times=msg.retry_times,
        state=_required(TASK_STATE, TaskState, msg.state),
        valid=msg.valid,
        host=msg.host,
        pid=msg.pid,
        log_path=msg.log_path,
        exit_code=msg.exit_code if msg.HasField("exit_code") else None,
        submit_time=_time(msg, "submit_time"),
        start_time=_time(msg, "start_time"),
        end_time=_time(msg, "end_time"),
        out_params=dict(msg.out_params),
        priority=_member(PRIORITY, Priority, msg.priority, Priority.MEDIUM),
        worker_group=msg.worker_group,
        state_reason=msg.state_reason,
        application_id=msg.application_id,
    )


def event_from_proto(msg: resources_pb2.InstanceEvent) -> InstanceEvent:
    return InstanceEvent(
        sequence=msg.sequence,
        workflow_instance_id=msg.workflow_instance_id,
        task_instance_id=msg.task_instance_id,
        task_name=msg.task_name,
        workflow_state=_member(WORKFLOW_STATE, WorkflowState, msg.workflow_state, None),
        task_state=_member(TASK_STATE, TaskState, msg.task_state, None),
        kind=_required(INSTANCE_EVENT_KIND, InstanceEventKind, msg.kind),
        message=msg.message,
        create_time=_time(msg, "create_time"),
    )


def watch_frame_from_proto(msg: master_service_pb2.WatchWorkflowInstanceResponse) -> WatchFrame:
    return WatchFrame(
        events=tuple(event_from_proto(e) for e in msg.events),
        cursor=msg.cursor,
        state=_member(WORKFLOW_STATE, WorkflowState, msg.state, None),
    )


def log_chunk_from_proto(
    msg: log_service_pb2.ReadTaskLogResponse | log_service_pb2.TailTaskLogResponse,
) -> LogChunk:
    size = msg.size if isinstance(msg, log_service_pb2.ReadTaskLogResponse) else None
    return LogChunk(
        data=msg.data,
        offset=msg.offset,
        next_offset=msg.next_offset,
        end_of_log=msg.end_of_log,
        size=size,
    )


def member_from_proto(msg: resources_pb2.ClusterMember) -> ClusterMember:
    beat = msg.heartbeat
    return ClusterMember(
        role=_required(SERVER_ROLE, ServerRole, msg.role),
        address=msg.address,
        group=msg.group,
        status=_member(SERVER_STATUS, ServerStatus, beat.status, None),
        cpu_usage=beat.cpu_usage,
        memory_usage=beat.memory_usage,
        load_average=beat.load_average,
        disk_usage=beat.disk_usage,
        slots_total=beat.slots_total,
        slots_in_use=beat.slots_in_use,
        queued=beat.queued,
        pid=beat.pid,
        start_time=_time(beat, "start_time"),
        report_time=_time(beat, "report_time"),
        weight=msg.weight,
        cluster_address=msg.cluster_address,
    )


def history_tally_from_proto(msg: master_service_pb2.HistoryTally) -> HistoryTally:
    kind = _member(HISTORY_KIND, HistoryKind, msg.kind, None)
    if kind is None:
        raise Internal(
            "the server sent a history tally without a kind",
            reason="UNKNOWN_ENUM_VALUE",
            metadata={"enum": "HISTORY_KIND", "number": "0"},
        )
    return HistoryTally(
        kind=kind,
        count=msg.count,
        oldest=_time(msg, "oldest"),
        newest=_time(msg, "newest"),
    )


def server_info_from_proto(msg: master_service_pb2.GetServerInfoResponse) -> ServerInfo:
    return ServerInfo(
        version=msg.version,
        api_version=msg.api_version,
        role=_member(SERVER_ROLE, ServerRole, msg.role, None),
        address=msg.address,
        start_time=_time(msg, "start_time"),
        counters=dict(msg.counters),
    )


def backfill_from_proto(msg: backfill_pb2.Backfill) -> Backfill:
    p = msg.progress
    return Backfill(
        id=msg.id,
        project=msg.project,
        workflow=msg.workflow,
        state=_required(BACKFILL_STATE, BackfillState, msg.state),
        dates=tuple(d.ToDatetime(tzinfo=UTC) for d in msg.dates),
        time_zone=msg.time_zone or "UTC",
        cron=msg.cron,
        order=_member(BACKFILL_ORDER, BackfillOrder, msg.order, BackfillOrder.ASCENDING),
        parallelism=msg.parallelism,
        reprocess=_member(
            BACKFILL_REPROCESS, BackfillReprocess, msg.reprocess, BackfillReprocess.ALL
        ),
        on_failure=_member(
            BACKFILL_FAILURE, BackfillFailure, msg.on_failure, BackfillFailure.CONTINUE
        ),
        progress=BackfillProgress(
            succeeded=p.succeeded,
            running=p.running,
            failed=p.failed,
            pending=p.pending,
            skipped=p.skipped,
            eta=p.eta.ToTimedelta() if p.HasField("eta") else None,
        ),
        create_time=_time(msg, "create_time"),
        end_time=_time(msg, "end_time"),
    )


def schedule_from_proto(msg: schedule_pb2.Schedule) -> ScheduleInfo:
    return ScheduleInfo(
        id=msg.id,
        project=msg.project,
        workflow=msg.workflow,
        cron=msg.cron,
        time_zone=msg.time_zone or "UTC",
        online=msg.online,
        start_time=_time(msg, "start_time"),
        end_time=_time(msg, "end_time"),
        catch_up=_member(CATCH_UP, CatchUp, msg.catch_up, CatchUp.LATEST),
        catch_up_cap=msg.catch_up_cap,
        overlap=_member(OVERLAP, Overlap, msg.overlap, Overlap.RUN),
        next_fire_time=_time(msg, "next_fire_time"),
        last_fire_time=_time(msg, "last_fire_time"),
    )
