"""Task instances a user settles by hand: force success."""

from __future__ import annotations

from dataclasses import dataclass

from dsched.errors import FailedPrecondition
from dsched.states import TaskState, WorkflowState
from dsched_server.app.transaction import Transaction
from dsched_server.core.dag import Dag
from dsched_server.core.records import InstanceRecord, TaskInstanceRecord
from dsched_server.store import definitions, events
from dsched_server.store import instances as instance_repo
from dsched_server.store import task_instances as ti_repo
from dsched_server.store.events import NewEvent

W = WorkflowState


@dataclass(frozen=True, slots=True)
class Forced:
    """A task instance forced to success, and its instance afterwards (SUCCEEDED if that was
    the last task missing)."""

    task_instance: TaskInstanceRecord
    instance: InstanceRecord


async def force_success(tx: Transaction, task_instance_id: int) -> Forced:
    """Marks the current FAILED or KILLED attempt of a task of a finished instance
    FORCED_SUCCESS; a FAILED or STOPPED instance whose tasks all succeeded then SUCCEEDED.

    FAILED_PRECONDITION: INSTANCE_NOT_FINISHED while the instance runs (its runner owns its
    tasks), ILLEGAL_TRANSITION for any other attempt.
    """
    ti = await ti_repo.get(tx.conn, task_instance_id)
    instance = await instance_repo.get_instance(tx.conn, ti.workflow_instance_id)
    if not instance.state.terminal:
        raise FailedPrecondition(
            f"workflow instance {instance.id} is {instance.state}; force success only "
            "applies to finished instances",
            reason="INSTANCE_NOT_FINISHED",
            metadata={"instance": str(instance.id), "state": instance.state.value},
        )
    if not ti.valid or ti.state not in (TaskState.FAILED, TaskState.KILLED):
        raise FailedPrecondition(
            f"task instance {ti.id} is {ti.state}"
            f"{'' if ti.valid else ' and superseded'}; only a current FAILED or KILLED "
            "attempt can be forced to success",
            reason="ILLEGAL_TRANSITION",
            metadata={"task_instance": str(ti.id), "state": ti.state.value},
        )
    await ti_repo.transition(
        tx.conn,
        ti.id,
        expected={ti.state},
        state=TaskState.FORCED_SUCCESS,
        values={"end_time": tx.now},
    )
    new_events = [
        NewEvent(
            workflow_instance_id=instance.id,
            task_instance_id=ti.id,
            task_name=ti.task_name,
            task_state=TaskState.FORCED_SUCCESS,
            message="forced to success by user",
        )
    ]
    if instance.state in (W.FAILED, W.STOPPED) and await _all_succeeded(tx, instance):
        await instance_repo.set_state(
            tx.conn,
            instance.id,
            epoch=None,
            expected={instance.state},
            state=W.SUCCEEDED,
            values={"state_reason": "all tasks succeeded (forced)"},
        )
        new_events.append(
            NewEvent(
                workflow_instance_id=instance.id,
                workflow_state=W.SUCCEEDED,
                message="all tasks succeeded (forced)",
            )
        )
    await events.append(tx.conn, new_events, tx.now)
    tx.instance_changed(instance.id)
    return Forced(
        task_instance=await ti_repo.get(tx.conn, ti.id),
        instance=await instance_repo.get_instance(tx.conn, instance.id),
    )


async def _all_succeeded(tx: Transaction, instance: InstanceRecord) -> bool:
    """Whether every enabled task in the instance's scope has a successful current attempt."""
    workflow = await definitions.get_workflow_by_code(
        tx.conn, instance.workflow_code, instance.workflow_version
    )
    dag = Dag(workflow.spec)
    scope = dag.scope(instance.run_scope.start_tasks, instance.run_scope.depend_type)
    done = {
        a.task_name
        for a in await ti_repo.valid_attempts(tx.conn, instance.id)
        if a.state.successful
    }
    return all(name in done or dag.tasks[name].disabled for name in scope)
