"""The dataclass <-> proto seam: exact round trips; hostile input becomes violations, not raises."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import dsched
from dsched import convert
from dsched.errors import FieldViolation
from dsched.options import Priority, TimeoutStrategy
from dsched.spec import ShellSpec, TaskSpec, WorkflowSpec, validate_workflow
from dsched.v1 import enums_pb2, log_service_pb2, master_service_pb2, resources_pb2


def _full_spec() -> WorkflowSpec:
    first = TaskSpec(
        name="extract",
        kind=ShellSpec(script="echo $dt\n"),
        description="pulls rows",
        priority=Priority.HIGHEST,
        worker_group="etl",
        retries=3,
        retry_interval=timedelta(seconds=1, microseconds=500),
        timeout=timedelta(hours=2),
        timeout_strategy=TimeoutStrategy.WARN,
        delay=timedelta(milliseconds=250),
        params={"rows": "10", "empty": ""},
        disabled=True,
    )
    second = TaskSpec(name="load", kind=ShellSpec(script="./load.sh"), upstream=("extract",))
    return WorkflowSpec(
        project="demo",
        name="etl",
        tasks=(first, second),
        description="daily",
        params={"dt": "2024-01-01"},
    )


@pytest.mark.parametrize("priority", list(Priority))
@pytest.mark.parametrize("strategy", list(TimeoutStrategy))
def test_every_enum_value_round_trips(priority: Priority, strategy: TimeoutStrategy) -> None:
    task = TaskSpec(
        name="a", kind=ShellSpec(script="x"), priority=priority, timeout_strategy=strategy
    )
    spec = WorkflowSpec(project="p", name="w", tasks=(task,))
    back, violations = convert.workflow_spec_from_proto(convert.workflow_spec_to_proto(spec))
    assert violations == [] and back == spec


def test_every_field_round_trips() -> None:
    spec = _full_spec()
    msg = convert.workflow_spec_to_proto(spec)
    assert msg.tasks[0].priority == enums_pb2.PRIORITY_HIGHEST
    assert msg.tasks[0].retry_interval.nanos == 500_000
    assert not msg.tasks[1].HasField("timeout")  # zero durations stay unset
    wire = resources_pb2.Workflow.FromString(msg.SerializeToString())
    back, violations = convert.workflow_spec_from_proto(wire)
    assert violations == []
    assert back == spec


def test_unspecified_enums_take_the_documented_defaults() -> None:
    msg = resources_pb2.Workflow(
        project="p", name="w", tasks=[resources_pb2.TaskDefinition(name="a", shell={"script": "x"})]
    )
    spec, violations = convert.workflow_spec_from_proto(msg)
    assert violations == []
    assert spec.tasks[0].priority is Priority.MEDIUM
    assert spec.tasks[0].timeout_strategy is TimeoutStrategy.FAIL


def _hostile_task() -> resources_pb2.TaskDefinition:
    task = resources_pb2.TaskDefinition(name="a", shell={"script": "x"})
    task.priority = 77  # type: ignore[assignment]
    task.timeout_strategy = -3  # type: ignore[assignment]
    task.retry_interval.seconds = -10
    task.timeout.seconds = 5
    task.timeout.nanos = -1
    task.delay.seconds = 10**12
    return task


def test_hostile_values_become_violations_with_proto_paths() -> None:
    msg = resources_pb2.Workflow(project="p", name="w")
    msg.tasks.append(resources_pb2.TaskDefinition(name="ok", shell={"script": "x"}))
    msg.tasks.append(_hostile_task())
    wire = resources_pb2.Workflow.FromString(msg.SerializeToString())  # unknown enums survive
    spec, violations = convert.workflow_spec_from_proto(wire)
    assert violations == [
        FieldViolation("workflow.tasks[1].priority", "unknown PRIORITY value 77"),
        FieldViolation("workflow.tasks[1].retry_interval", "must not be negative"),
        FieldViolation(
            "workflow.tasks[1].timeout",
            "is not a valid duration (seconds and nanos differ in sign)",
        ),
        FieldViolation("workflow.tasks[1].timeout_strategy", "unknown TIMEOUT_STRATEGY value -3"),
        FieldViolation("workflow.tasks[1].delay", "is not a valid duration (out of range)"),
    ]
    # The spec holds defaults where the input was unusable, so validation does not repeat them.
    task = spec.tasks[1]
    assert task.retry_interval == task.timeout == task.delay == timedelta(0)
    assert validate_workflow(spec) == ([], False)


def test_other_hostile_shapes() -> None:
    msg = resources_pb2.Workflow(project="", name="w\x00", tasks=[resources_pb2.TaskDefinition()])
    msg.tasks[0].retry_interval.nanos = 2_000_000_000
    spec, violations = convert.workflow_spec_from_proto(msg, path="req.wf")
    assert violations == [
        FieldViolation("req.wf.tasks[0].retry_interval", "is not a valid duration (out of range)")
    ]
    assert spec.tasks[0].kind is None  # no oneof set: validation reports the missing kind
    fields = {v.field for v in validate_workflow(spec)[0]}
    assert {"workflow.project", "workflow.name", "workflow.tasks[0].kind"} <= fields


def _stamp(msg: object, when: datetime) -> None:
    msg.FromDatetime(when)  # type: ignore[attr-defined]


def test_instance_from_proto() -> None:
    when = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    msg = resources_pb2.WorkflowInstance(
        id=9,
        project="p",
        workflow="w",
        workflow_code=5,
        workflow_version=2,
        state=enums_pb2.WORKFLOW_INSTANCE_STATE_FAILED,
        command_type=enums_pb2.COMMAND_TYPE_RERUN,
        params={"a": "1"},
        start_tasks=["t"],
        host="m:1",
        run_times=2,
        state_reason="task t failed",
        var_pool={"out": "x"},
    )
    _stamp(msg.start_time, when)
    _stamp(msg.end_time, when + timedelta(seconds=90))
    inst = convert.instance_from_proto(msg)
    assert inst.state is dsched.WorkflowState.FAILED and inst.terminal
    assert inst.command_type is dsched.CommandType.RERUN
    assert inst.priority is Priority.MEDIUM  # UNSPECIFIED -> the server's default
    assert inst.failure_strategy is dsched.FailureStrategy.CONTINUE
    assert inst.task_depend_type is dsched.TaskDependType.TASK_POST
    assert inst.start_time == when and inst.submit_time is None
    assert inst.duration == timedelta(seconds=90)
    assert (inst.params, inst.var_pool, inst.start_tasks) == ({"a": "1"}, {"out": "x"}, ("t",))


def test_task_instance_exit_code_presence() -> None:
    msg = resources_pb2.TaskInstance(
        id=1, task_name="t", state=enums_pb2.TASK_INSTANCE_STATE_RUNNING
    )
    assert convert.task_instance_from_proto(msg).exit_code is None
    msg.exit_code = 0
    assert convert.task_instance_from_proto(msg).exit_code == 0


def test_unknown_states_from_a_newer_server_raise_internal() -> None:
    msg = resources_pb2.WorkflowInstance(id=1)
    msg.state = 99  # type: ignore[assignment]
    with pytest.raises(dsched.Internal) as caught:
        convert.instance_from_proto(msg)
    assert caught.value.reason == "UNKNOWN_ENUM_VALUE"
    assert caught.value.metadata == {"enum": "WORKFLOW_INSTANCE_STATE", "number": "99"}
    with pytest.raises(dsched.Internal):
        convert.instance_from_proto(resources_pb2.WorkflowInstance(id=1))  # no state at all


def test_every_event_kind_round_trips_and_an_unknown_one_raises_internal() -> None:
    for kind in dsched.InstanceEventKind:
        msg = resources_pb2.InstanceEvent(sequence=1, kind=convert.INSTANCE_EVENT_KIND.name(kind))
        assert convert.event_from_proto(msg).kind is kind
    names = set(enums_pb2.InstanceEventKind.keys()) - {"INSTANCE_EVENT_KIND_UNSPECIFIED"}
    assert names == {convert.INSTANCE_EVENT_KIND.name(k) for k in dsched.InstanceEventKind}
    for number in (0, 99):
        msg = resources_pb2.InstanceEvent(sequence=1)
        msg.kind = number  # type: ignore[assignment]
        with pytest.raises(dsched.Internal) as caught:
            convert.event_from_proto(msg)
        assert caught.value.reason == "UNKNOWN_ENUM_VALUE"


def test_events_frames_and_log_chunks() -> None:
    task_event = resources_pb2.InstanceEvent(
        sequence=3,
        workflow_instance_id=1,
        task_instance_id=7,
        task_name="t",
        task_state=enums_pb2.TASK_INSTANCE_STATE_SUCCEEDED,
        kind=enums_pb2.INSTANCE_EVENT_KIND_TIMEOUT_WARNING,
    )
    frame = convert.watch_frame_from_proto(
        master_service_pb2.WatchWorkflowInstanceResponse(events=[task_event], cursor=3)
    )
    (event,) = frame.events
    assert event.is_task_event and event.task_state is dsched.TaskState.SUCCEEDED
    assert event.workflow_state is None and frame.state is None and frame.cursor == 3
    assert event.kind is dsched.InstanceEventKind.TIMEOUT_WARNING
    read = log_service_pb2.ReadTaskLogResponse(data=b"ab", offset=1, next_offset=3, size=9)
    assert convert.log_chunk_from_proto(read) == dsched.LogChunk(
        data=b"ab", offset=1, next_offset=3, size=9
    )
    tail = log_service_pb2.TailTaskLogResponse(offset=3, next_offset=3, end_of_log=True)
    assert convert.log_chunk_from_proto(tail).size is None


def test_workflow_info_from_proto() -> None:
    msg = convert.workflow_spec_to_proto(_full_spec())
    msg.code, msg.version = 11, 4
    msg.release_state = enums_pb2.RELEASE_STATE_ONLINE
    info = convert.workflow_info_from_proto(msg)
    assert info.spec == _full_spec()
    assert (info.code, info.version, info.online, info.project, info.name) == (
        11,
        4,
        True,
        "demo",
        "etl",
    )
