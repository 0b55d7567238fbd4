"""The workflow and task state tables, checked over every (src, dst) pair (ARCHITECTURE.md §8.3)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from typing import TypeVar

import pytest

from dsched.errors import FailedPrecondition, IllegalTransition, error_class
from dsched.states import TASK_TERMINAL, WORKFLOW_TERMINAL, TaskState, WorkflowState
from dsched_server.core import transitions as tr

W = WorkflowState
T = TaskState

WORKFLOW_PAIRS = list(itertools.product(WorkflowState, WorkflowState))
TASK_PAIRS = list(itertools.product(TaskState, TaskState))

S = TypeVar("S")


def _reachable(table: Mapping[S, frozenset[S]], roots: Iterable[S]) -> set[S]:
    seen = set(roots)
    stack = list(seen)
    while stack:
        for nxt in table[stack.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


# ------------------------------------------------------------------------------- every pair


@pytest.mark.parametrize(("src", "dst"), WORKFLOW_PAIRS, ids=lambda s: s.value)
def test_workflow_pair_is_checked_against_the_table(src: W, dst: W) -> None:
    allowed = dst in tr.WORKFLOW_TRANSITIONS[src]
    assert tr.workflow_transition_allowed(src, dst) is allowed
    if allowed:
        tr.check_workflow_transition(src, dst, instance_id=7)
        return
    with pytest.raises(IllegalTransition) as info:
        tr.check_workflow_transition(src, dst, instance_id=7)
    err = info.value
    assert err.reason == "ILLEGAL_TRANSITION"
    assert err.code == "FAILED_PRECONDITION"
    assert err.metadata == {"instance": "7", "from": src.value, "to": dst.value}
    assert src.value in err.message
    assert dst.value in err.message


@pytest.mark.parametrize(("src", "dst"), TASK_PAIRS, ids=lambda s: s.value)
def test_task_pair_is_checked_against_the_table(src: T, dst: T) -> None:
    allowed = dst in tr.TASK_TRANSITIONS[src]
    assert tr.task_transition_allowed(src, dst) is allowed
    if allowed:
        tr.check_task_transition(src, dst, task_instance_id=11)
        return
    with pytest.raises(IllegalTransition) as info:
        tr.check_task_transition(src, dst, task_instance_id=11)
    err = info.value
    assert err.reason == "ILLEGAL_TRANSITION"
    assert err.metadata == {"task_instance": "11", "from": src.value, "to": dst.value}


def test_the_number_of_allowed_pairs_matches_the_tables() -> None:
    # Guards the parametrized tests above against a table that silently lost its rows.
    allowed_w = sum(tr.workflow_transition_allowed(s, d) for s, d in WORKFLOW_PAIRS)
    allowed_t = sum(tr.task_transition_allowed(s, d) for s, d in TASK_PAIRS)
    assert allowed_w == sum(len(v) for v in tr.WORKFLOW_TRANSITIONS.values()) > 0
    assert allowed_t == sum(len(v) for v in tr.TASK_TRANSITIONS.values()) > 0


# ------------------------------------------------------------------------------- table shape


def test_every_state_has_a_row() -> None:
    assert set(tr.WORKFLOW_TRANSITIONS) == set(WorkflowState)
    assert set(tr.TASK_TRANSITIONS) == set(TaskState)


@pytest.mark.parametrize("state", list(WorkflowState) + list(TaskState), ids=str)
def test_no_state_transitions_to_itself(state: W | T) -> None:
    table: Mapping[W, frozenset[W]] | Mapping[T, frozenset[T]]
    table = tr.WORKFLOW_TRANSITIONS if isinstance(state, WorkflowState) else tr.TASK_TRANSITIONS
    assert state not in table[state]  # type: ignore[index]


@pytest.mark.parametrize("state", list(WorkflowState) + list(TaskState), ids=str)
def test_persisted_state_values_are_their_names(state: W | T) -> None:
    # The values are stored in the metadata DB and sent as proto enum suffixes: they are permanent.
    assert state.value == state.name


def test_succeeded_task_state_has_no_way_out() -> None:
    for dst in TaskState:
        with pytest.raises(IllegalTransition):
            tr.check_task_transition(T.SUCCEEDED, dst, task_instance_id=1)


@pytest.mark.parametrize("src", [T.FAILED, T.KILLED])
def test_failed_and_killed_attempts_can_only_be_forced_to_success(src: T) -> None:
    assert tr.TASK_TRANSITIONS[src] == {T.FORCED_SUCCESS}


def test_forced_success_is_reached_only_from_failed_or_killed() -> None:
    sources = {s for s, outs in tr.TASK_TRANSITIONS.items() if T.FORCED_SUCCESS in outs}
    assert sources == {T.FAILED, T.KILLED}


def test_terminal_task_states_only_leave_towards_forced_success() -> None:
    for state in TASK_TERMINAL:
        assert tr.TASK_TRANSITIONS[state] <= {T.FORCED_SUCCESS}
        assert state.terminal


def test_non_terminal_task_states_can_reach_every_outcome() -> None:
    for state in set(TaskState) - TASK_TERMINAL:
        assert not state.terminal
        reach = _reachable(tr.TASK_TRANSITIONS, [state])
        assert {T.SUCCEEDED, T.FAILED, T.KILLED, T.NEED_FAULT_TOLERANCE} <= reach


def test_queued_task_states_can_be_cancelled_paused_or_killed() -> None:
    # Execution emits Cancel(PAUSED | KILLED) for attempts that never reached a worker.
    for queued in (T.SUBMITTED, T.DELAY_EXECUTION):
        assert {T.PAUSED, T.KILLED} <= tr.TASK_TRANSITIONS[queued]


def test_attempts_on_a_worker_cannot_be_paused() -> None:
    # Pause lets a running attempt finish; only stop (KILLED) interrupts it.
    for on_worker in (T.DISPATCHED, T.RUNNING):
        assert T.PAUSED not in tr.TASK_TRANSITIONS[on_worker]
        assert T.KILLED in tr.TASK_TRANSITIONS[on_worker]


def test_running_event_may_overtake_the_dispatch_reply() -> None:
    assert tr.task_transition_allowed(T.SUBMITTED, T.RUNNING)
    assert not tr.task_transition_allowed(T.RUNNING, T.DISPATCHED)
    assert not tr.task_transition_allowed(T.RUNNING, T.SUBMITTED)


def test_every_task_state_is_reachable_from_an_initial_state() -> None:
    assert _reachable(tr.TASK_TRANSITIONS, [T.SUBMITTED, T.DELAY_EXECUTION]) == set(TaskState)


def test_every_workflow_state_is_reachable_from_the_state_instances_are_created_in() -> None:
    # A state nothing leads to is one no code sets: implement it or retire it from the contract.
    assert _reachable(tr.WORKFLOW_TRANSITIONS, [W.SUBMITTED]) == set(WorkflowState)


def test_every_workflow_state_can_reach_a_terminal_state() -> None:
    for state in WorkflowState:
        assert _reachable(tr.WORKFLOW_TRANSITIONS, [state]) & WORKFLOW_TERMINAL


def test_terminal_workflow_states_only_requeue_stop_or_force_success() -> None:
    for state in WORKFLOW_TERMINAL:
        assert state.terminal
        assert tr.WORKFLOW_TRANSITIONS[state] <= {W.SUBMITTED, W.SUCCEEDED, W.STOPPED}
        # never straight back into the engine's hands
        assert not tr.WORKFLOW_TRANSITIONS[state] & tr.OWNED_STATES


def test_non_terminal_workflow_states_are_not_terminal() -> None:
    for state in set(WorkflowState) - WORKFLOW_TERMINAL:
        assert not state.terminal


def test_owned_states_fail_over_and_come_back_to_an_owned_state() -> None:
    for state in tr.OWNED_STATES:
        assert W.FAILOVER in tr.WORKFLOW_TRANSITIONS[state]
    assert tr.WORKFLOW_TRANSITIONS[W.FAILOVER] == tr.OWNED_STATES
    sources = {s for s, outs in tr.WORKFLOW_TRANSITIONS.items() if W.FAILOVER in outs}
    assert sources == tr.OWNED_STATES


def test_paused_is_reached_only_through_ready_pause() -> None:
    sources = {s for s, outs in tr.WORKFLOW_TRANSITIONS.items() if W.PAUSED in outs}
    assert sources == {W.READY_PAUSE}


def test_stop_cannot_be_undone_by_a_late_pause() -> None:
    assert not tr.workflow_transition_allowed(W.READY_STOP, W.READY_PAUSE)
    assert not tr.workflow_transition_allowed(W.READY_STOP, W.PAUSED)
    assert not tr.workflow_transition_allowed(W.READY_STOP, W.RUNNING)


def test_engine_outcomes_are_legal_from_every_owned_state() -> None:
    # Execution finishes RUNNING / READY_PAUSE with SUCCEEDED or FAILED, READY_STOP with STOPPED.
    for state in (W.RUNNING, W.READY_PAUSE):
        assert {W.SUCCEEDED, W.FAILED} <= tr.WORKFLOW_TRANSITIONS[state]
    assert W.PAUSED in tr.WORKFLOW_TRANSITIONS[W.READY_PAUSE]
    assert W.STOPPED in tr.WORKFLOW_TRANSITIONS[W.READY_STOP]


# ------------------------------------------------------------------------------- client actions


@pytest.mark.parametrize(
    ("allowed", "target"),
    [
        (tr.CAN_PAUSE, W.READY_PAUSE),
        (tr.CAN_STOP_VIA_OWNER, W.READY_STOP),
        (tr.CAN_STOP_IN_STORE, W.STOPPED),
        (tr.CAN_RESUME, W.SUBMITTED),
        (tr.CAN_RERUN, W.SUBMITTED),
        (tr.CAN_RECOVER_FAILED, W.SUBMITTED),
        (tr.CAN_EXECUTE_FROM_TASK, W.SUBMITTED),
    ],
    ids=["pause", "stop-owner", "stop-store", "resume", "rerun", "recover", "execute-from"],
)
def test_client_actions_only_ask_for_transitions_the_table_allows(
    allowed: frozenset[W], target: W
) -> None:
    assert allowed
    for state in allowed:
        assert tr.workflow_transition_allowed(state, target), state


def test_client_actions_split_instances_between_owner_and_store() -> None:
    # A master-driven instance is stopped through its master; any other one in the store.
    assert tr.CAN_STOP_VIA_OWNER <= tr.OWNED_STATES
    assert not tr.CAN_STOP_IN_STORE & tr.OWNED_STATES
    assert tr.CAN_PAUSE <= tr.OWNED_STATES
    assert {W.PAUSED} == tr.CAN_RESUME


def test_requeue_actions_need_a_finished_instance() -> None:
    for allowed in (tr.CAN_RERUN, tr.CAN_RECOVER_FAILED, tr.CAN_EXECUTE_FROM_TASK, tr.CAN_RESUME):
        assert allowed <= WORKFLOW_TERMINAL


# ------------------------------------------------------------------------------- require_state


def test_require_state_accepts_an_allowed_state() -> None:
    tr.require_state(W.RUNNING, tr.CAN_PAUSE, action="pause", instance_id=3)


@pytest.mark.parametrize("state", sorted(set(WorkflowState) - tr.CAN_STOP_VIA_OWNER))
def test_require_state_rejects_with_machine_readable_metadata(state: W) -> None:
    with pytest.raises(IllegalTransition) as info:
        tr.require_state(state, tr.CAN_STOP_VIA_OWNER, action="stop", instance_id=42)
    err = info.value
    assert isinstance(err, FailedPrecondition)
    assert err.reason == "ILLEGAL_TRANSITION"
    assert err.metadata == {"instance": "42", "state": state.value, "action": "stop"}
    # the allowed states are listed, sorted, so the message is stable
    assert "(allowed: READY_PAUSE, RUNNING)" in err.message
    assert f"cannot stop workflow instance 42 in state {state.value}" in err.message


def test_illegal_transition_round_trips_through_the_error_mapping() -> None:
    err = IllegalTransition("x")
    assert error_class(err.code, err.reason) is IllegalTransition
