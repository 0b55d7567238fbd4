"""The in-memory world behind the fake master used by the SDK and CLI tests.

It keeps projects, workflow versions, instances with an append-only event log, task instances and
their logs, all guarded by one condition variable so that watch and log streams wake up on
changes instead of polling. A tiny driver "runs" a started workflow at once: tasks in definition
order, each logging the text after ``echo`` in its script, failing on ``exit 1``, and holding
forever (until the fake stops) on ``sleep``. :func:`rich_status` builds the statuses a real
master sends: ``ErrorInfo`` and ``BadRequest`` details packed into a ``google.rpc.Status``.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf import any_pb2, timestamp_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from dsched.v1 import enums_pb2, resources_pb2

WS = enums_pb2.WorkflowInstanceState
TS = enums_pb2.TaskInstanceState
TERMINAL = {
    WS.WORKFLOW_INSTANCE_STATE_SUCCEEDED,
    WS.WORKFLOW_INSTANCE_STATE_FAILED,
    WS.WORKFLOW_INSTANCE_STATE_STOPPED,
    WS.WORKFLOW_INSTANCE_STATE_PAUSED,
}


def now() -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.GetCurrentTime()
    return stamp


@dataclass
class Log:
    data: bytearray = field(default_factory=bytearray)
    terminal: bool = False


@dataclass
class WorkflowRecord:
    versions: list[resources_pb2.Workflow]
    online: bool = False


class World:
    """Everything the fake master knows; every method takes the lock itself."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.stopping = threading.Event()
        self.projects: dict[str, resources_pb2.Project] = {}
        self.workflows: dict[tuple[str, str], WorkflowRecord] = {}
        self.instances: dict[int, resources_pb2.WorkflowInstance] = {}
        self.events: dict[int, list[resources_pb2.InstanceEvent]] = {}
        self.tasks: dict[int, resources_pb2.TaskInstance] = {}
        self.logs: dict[int, Log] = {}
        self.auto_run = True
        # Pause and stop answer CONTROL_STATUS_PENDING and change nothing (an unreachable owner).
        self.controls_pending = False
        self._ids = itertools.count(1)
        self._task_ids = itertools.count(100)
        self._sequence = itertools.count(1)

    # ------------------------------------------------------------------------- definitions

    def store_workflow(self, msg: resources_pb2.Workflow, *, new: bool) -> resources_pb2.Workflow:
        with self.cond:
            key = (msg.project, msg.name)
            stored = resources_pb2.Workflow()
            stored.CopyFrom(msg)
            stored.create_time.CopyFrom(now())
            stored.update_time.CopyFrom(now())
            stored.release_state = enums_pb2.RELEASE_STATE_OFFLINE
            if new:
                stored.code = 1000 + len(self.workflows)
                stored.version = 1
                self.workflows[key] = WorkflowRecord([stored])
            else:
                record = self.workflows[key]
                stored.code = record.versions[-1].code
                stored.version = record.versions[-1].version + 1
                record.versions.append(stored)
            return stored

    def current(self, project: str, name: str) -> resources_pb2.Workflow | None:
        with self.cond:
            record = self.workflows.get((project, name))
            if record is None:
                return None
            out = resources_pb2.Workflow()
            out.CopyFrom(record.versions[-1])
            online = enums_pb2.RELEASE_STATE_ONLINE
            out.release_state = online if record.online else enums_pb2.RELEASE_STATE_OFFLINE
            return out

    # ------------------------------------------------------------------------- instances

    def add_instance(
        self, project: str, workflow: resources_pb2.Workflow, **fields: object
    ) -> resources_pb2.WorkflowInstance:
        with self.cond:
            inst = resources_pb2.WorkflowInstance(
                id=next(self._ids),
                project=project,
                workflow=workflow.name,
                workflow_code=workflow.code,
                workflow_version=workflow.version,
                state=WS.WORKFLOW_INSTANCE_STATE_SUBMITTED,
                command_type=enums_pb2.COMMAND_TYPE_START,
                run_times=1,
                **fields,  # type: ignore[arg-type]
            )
            inst.submit_time.CopyFrom(now())
            self.instances[inst.id] = inst
            self.events[inst.id] = []
            self._event(inst.id, workflow_state=WS.WORKFLOW_INSTANCE_STATE_SUBMITTED)
            answer = resources_pb2.WorkflowInstance()
            answer.CopyFrom(inst)  # the driver thread goes on changing the stored one
            return answer

    def _event(self, instance_id: int, **fields: object) -> None:
        event = resources_pb2.InstanceEvent(
            sequence=next(self._sequence),
            workflow_instance_id=instance_id,
            kind=enums_pb2.INSTANCE_EVENT_KIND_STATE,
            **fields,  # type: ignore[arg-type]
        )
        event.create_time.CopyFrom(now())
        self.events[instance_id].append(event)
        self.cond.notify_all()

    def set_state(self, instance_id: int, state: int, reason: str = "") -> None:
        with self.cond:
            inst = self.instances[instance_id]
            inst.state = state  # type: ignore[assignment]
            inst.state_reason = reason
            if state == WS.WORKFLOW_INSTANCE_STATE_RUNNING and not inst.HasField("start_time"):
                inst.start_time.CopyFrom(now())
            if state in TERMINAL:
                inst.end_time.CopyFrom(now())
            self._event(instance_id, workflow_state=state)

    def add_task(self, instance_id: int, name: str) -> resources_pb2.TaskInstance:
        with self.cond:
            task = resources_pb2.TaskInstance(
                id=next(self._task_ids),
                workflow_instance_id=instance_id,
                task_name=name,
                attempt=1,
                state=TS.TASK_INSTANCE_STATE_SUBMITTED,
                valid=True,
                host="127.0.0.1:5679",
                worker_group="default",
            )
            task.submit_time.CopyFrom(now())
            self.tasks[task.id] = task
            self.logs[task.id] = Log()
            return task

    def set_task_state(self, task_id: int, state: int, exit_code: int | None = None) -> None:
        with self.cond:
            task = self.tasks[task_id]
            task.state = state  # type: ignore[assignment]
            if state == TS.TASK_INSTANCE_STATE_RUNNING:
                task.start_time.CopyFrom(now())
                task.pid = 4242
            else:
                task.end_time.CopyFrom(now())
                if exit_code is not None:
                    task.exit_code = exit_code
                self.logs[task_id].terminal = True
            self._event(
                task.workflow_instance_id,
                task_instance_id=task_id,
                task_name=task.task_name,
                task_state=state,
            )

    def append_log(self, task_id: int, data: bytes) -> None:
        with self.cond:
            self.logs[task_id].data += data
            self.cond.notify_all()

    def finish_log(self, task_id: int) -> None:
        with self.cond:
            self.logs[task_id].terminal = True
            self.cond.notify_all()

    # ------------------------------------------------------------------------- driver

    def drive(self, instance_id: int, workflow: resources_pb2.Workflow) -> None:
        """Runs an instance to its end in a thread (see the module docstring)."""
        thread = threading.Thread(target=self._drive, args=(instance_id, workflow), daemon=True)
        thread.start()

    def _drive(self, instance_id: int, workflow: resources_pb2.Workflow) -> None:
        self.set_state(instance_id, WS.WORKFLOW_INSTANCE_STATE_RUNNING)
        for definition in workflow.tasks:
            task = self.add_task(instance_id, definition.name)
            self.set_task_state(task.id, TS.TASK_INSTANCE_STATE_RUNNING)
            script = definition.shell.script
            for line in script.splitlines():
                if line.startswith("echo "):
                    self.append_log(task.id, line.removeprefix("echo ").encode() + b"\n")
            if "sleep" in script:
                self.stopping.wait()
                return
            if "exit 1" in script:
                self.set_task_state(task.id, TS.TASK_INSTANCE_STATE_FAILED, exit_code=1)
                self.set_state(
                    instance_id, WS.WORKFLOW_INSTANCE_STATE_FAILED, f"task {definition.name} failed"
                )
                return
            self.set_task_state(task.id, TS.TASK_INSTANCE_STATE_SUCCEEDED, exit_code=0)
        self.set_state(instance_id, WS.WORKFLOW_INSTANCE_STATE_SUCCEEDED)

    def stop(self) -> None:
        self.stopping.set()
        with self.cond:
            self.cond.notify_all()


def rich_status(
    code: grpc.StatusCode,
    message: str,
    *,
    reason: str = "",
    metadata: dict[str, str] | None = None,
    violations: Sequence[tuple[str, str]] = (),
    domain: str = "dsched",
) -> grpc.Status:
    """A status with ErrorInfo (if ``reason``) and BadRequest (if ``violations``) details."""
    details = []
    if reason:
        packed = any_pb2.Any()
        packed.Pack(error_details_pb2.ErrorInfo(reason=reason, domain=domain, metadata=metadata))
        details.append(packed)
    if violations:
        bad = error_details_pb2.BadRequest(
            field_violations=[
                error_details_pb2.BadRequest.FieldViolation(field=f, description=d)
                for f, d in violations
            ]
        )
        packed = any_pb2.Any()
        packed.Pack(bad)
        details.append(packed)
    code_number: int = code.value[0]
    status = status_pb2.Status(code=code_number, message=message, details=details)
    converted: grpc.Status = rpc_status.to_status(status)
    return converted


def page(items: list[Any], size: int, token: str) -> tuple[list[Any], str]:
    start = int(token or 0)
    size = size or 50
    end = start + size
    return items[start:end], (str(end) if end < len(items) else "")
