"""State machines of workflow and task instances, as tables (ARCHITECTURE.md §8.3).

The store refuses every state write these tables forbid (``store/guard.py``): a forbidden one
raises :class:`~dsched.errors.IllegalTransition` (FAILED_PRECONDITION on the wire) and stores
nothing. The tables follow DolphinScheduler's state set with dsched's names.

A write may pass through states on its way (a *path*): an owner's batch coalesces what happened to
one row, so READY_PAUSE then PAUSED reach the store as one write from RUNNING, and every step of
the path is checked. A write that keeps the state of a live row (a waiting reason on a SUBMITTED
attempt) is a field update, not a transition; a finished row's fields never change that way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from dsched.errors import IllegalTransition
from dsched.states import TaskState, WorkflowState

W = WorkflowState
T = TaskState

WORKFLOW_TRANSITIONS: Mapping[WorkflowState, frozenset[WorkflowState]] = {
    # claimed by a master; stopped before a master claimed it
    W.SUBMITTED: frozenset({W.RUNNING, W.READY_PAUSE, W.READY_STOP, W.STOPPED}),
    W.RUNNING: frozenset({W.READY_PAUSE, W.READY_STOP, W.SUCCEEDED, W.FAILED, W.FAILOVER}),
    W.READY_PAUSE: frozenset({W.PAUSED, W.READY_STOP, W.SUCCEEDED, W.FAILED, W.FAILOVER}),
    W.READY_STOP: frozenset({W.STOPPED, W.SUCCEEDED, W.FAILED, W.FAILOVER}),
    # resume / rerun / execute-from-task put it back in the command queue
    W.PAUSED: frozenset({W.SUBMITTED, W.STOPPED}),
    W.STOPPED: frozenset({W.SUBMITTED, W.SUCCEEDED}),
    W.FAILED: frozenset({W.SUBMITTED, W.SUCCEEDED}),
    W.SUCCEEDED: frozenset({W.SUBMITTED}),
    # a surviving master re-claims it and restores the state it had
    W.FAILOVER: frozenset({W.RUNNING, W.READY_PAUSE, W.READY_STOP}),
}

TASK_TRANSITIONS: Mapping[TaskState, frozenset[TaskState]] = {
    T.DELAY_EXECUTION: frozenset({T.SUBMITTED, T.KILLED, T.PAUSED, T.NEED_FAULT_TOLERANCE}),
    # RUNNING straight from SUBMITTED: the worker's RUNNING event can overtake the dispatch reply.
    T.SUBMITTED: frozenset(
        {
            T.DISPATCHED,
            T.RUNNING,
            T.SUCCEEDED,
            T.FAILED,
            T.KILLED,
            T.PAUSED,
            T.NEED_FAULT_TOLERANCE,
        }
    ),
    T.DISPATCHED: frozenset({T.RUNNING, T.SUCCEEDED, T.FAILED, T.KILLED, T.NEED_FAULT_TOLERANCE}),
    T.RUNNING: frozenset({T.SUCCEEDED, T.FAILED, T.KILLED, T.NEED_FAULT_TOLERANCE}),
    T.FAILED: frozenset({T.FORCED_SUCCESS}),
    T.KILLED: frozenset({T.FORCED_SUCCESS}),
    T.SUCCEEDED: frozenset(),
    T.PAUSED: frozenset(),
    T.NEED_FAULT_TOLERANCE: frozenset(),
    T.FORCED_SUCCESS: frozenset(),
}

# The states an attempt is created in (creation is no transition, but must not skip the table).
TASK_INITIAL = frozenset({T.SUBMITTED, T.DELAY_EXECUTION})

# What clients may ask for, by current state.
CAN_PAUSE = frozenset({W.RUNNING})
CAN_STOP_VIA_OWNER = frozenset({W.RUNNING, W.READY_PAUSE})
CAN_STOP_IN_STORE = frozenset({W.SUBMITTED, W.PAUSED})
CAN_RESUME = frozenset({W.PAUSED})
CAN_RERUN = frozenset({W.SUCCEEDED, W.FAILED, W.STOPPED, W.PAUSED})
CAN_RECOVER_FAILED = frozenset({W.FAILED, W.STOPPED})
CAN_EXECUTE_FROM_TASK = frozenset({W.SUCCEEDED, W.FAILED, W.STOPPED, W.PAUSED})
# Instances a master must keep driving (and that fail over when their master dies).
OWNED_STATES = frozenset({W.RUNNING, W.READY_PAUSE, W.READY_STOP})


def workflow_transition_allowed(src: WorkflowState, dst: WorkflowState) -> bool:
    return dst in WORKFLOW_TRANSITIONS[src]


def task_transition_allowed(src: TaskState, dst: TaskState) -> bool:
    return dst in TASK_TRANSITIONS[src]


def task_path_allowed(src: TaskState, path: Iterable[TaskState]) -> bool:
    """Whether a task instance in ``src`` may be written through ``path`` (its last state is the
    one stored): every step is in the table or keeps a live state."""
    for dst in path:
        if not (dst in TASK_TRANSITIONS[src] or (dst is src and not src.terminal)):
            return False
        src = dst
    return True


def workflow_path_allowed(src: WorkflowState, path: Iterable[WorkflowState]) -> bool:
    """Whether a workflow instance in ``src`` may be written through ``path`` (see
    :func:`task_path_allowed`)."""
    for dst in path:
        if not (dst in WORKFLOW_TRANSITIONS[src] or (dst is src and not src.terminal)):
            return False
        src = dst
    return True


def check_workflow_transition(src: WorkflowState, dst: WorkflowState, *, instance_id: int) -> None:
    """Raises IllegalTransition unless ``src -> dst`` is in the workflow table."""
    if not workflow_transition_allowed(src, dst):
        raise IllegalTransition(
            f"workflow instance {instance_id} cannot go from {src} to {dst}",
            metadata={"instance": str(instance_id), "from": src.value, "to": dst.value},
        )


def check_task_transition(src: TaskState, dst: TaskState, *, task_instance_id: int) -> None:
    """Raises IllegalTransition unless ``src -> dst`` is in the task table."""
    if not task_transition_allowed(src, dst):
        raise IllegalTransition(
            f"task instance {task_instance_id} cannot go from {src} to {dst}",
            metadata={"task_instance": str(task_instance_id), "from": src.value, "to": dst.value},
        )


def require_state(
    state: WorkflowState, allowed: frozenset[WorkflowState], *, action: str, instance_id: int
) -> None:
    """Raises IllegalTransition if a client action is not allowed in ``state``."""
    if state not in allowed:
        wanted = ", ".join(sorted(s.value for s in allowed))
        raise IllegalTransition(
            f"cannot {action} workflow instance {instance_id} in state {state} (allowed: {wanted})",
            metadata={"instance": str(instance_id), "state": state.value, "action": action},
        )
