"""The rules of pause and stop (core/controls.py): legality over every state, agreement with
the workflow transition table, and deterministic resolution of controls recorded in sequence."""

from __future__ import annotations

import itertools

import pytest

from dsched.states import WorkflowState
from dsched_server.core import controls as c
from dsched_server.core import transitions as tr
from dsched_server.core.controls import ControlKind, ControlOutcome

W = WorkflowState
K = ControlKind
PAUSE, STOP = K.PAUSE, K.STOP

EXPECTED_TARGET = {
    (W.RUNNING, PAUSE): W.READY_PAUSE,
    (W.RUNNING, STOP): W.READY_STOP,
    (W.READY_PAUSE, STOP): W.READY_STOP,
    (W.READY_STOP, STOP): W.READY_STOP,  # joins the stop under way
}


@pytest.mark.parametrize(
    ("state", "kind"), list(itertools.product(W, K)), ids=lambda v: str(v.value)
)
def test_target_of_every_state_and_kind(state: W, kind: K) -> None:
    expected = EXPECTED_TARGET.get((state, kind))
    assert c.target(state, kind) is expected
    if expected is not None and expected is not state:
        assert tr.workflow_transition_allowed(state, expected)  # agrees with the table


@pytest.mark.parametrize(
    ("state", "kind"), list(itertools.product(W, K)), ids=lambda v: str(v.value)
)
def test_a_refused_control_changes_nothing_and_says_why(state: W, kind: K) -> None:
    [r] = c.resolve(state, [kind])
    if c.target(state, kind) is None:
        assert (r.outcome, r.state) == (ControlOutcome.REJECTED, state)
        assert r.reason
    else:
        assert (r.outcome, r.state, r.reason) == (ControlOutcome.APPLIED, c.target(state, kind), "")


def test_terminal_states_say_the_instance_ended_first() -> None:
    for state in (W.SUCCEEDED, W.FAILED, W.STOPPED, W.PAUSED):
        assert c.refusal(state, STOP) == f"the instance ended {state} before the stop was applied"
    assert c.refusal(W.READY_PAUSE, PAUSE) == "a pause is already under way"
    assert c.refusal(W.READY_STOP, PAUSE) == "a stop is under way"


def test_pause_then_stop_is_a_stop_and_stop_then_pause_refuses_the_pause() -> None:
    first = c.resolve(W.RUNNING, [PAUSE, STOP])
    assert [(r.outcome, r.state) for r in first] == [
        (ControlOutcome.APPLIED, W.READY_PAUSE),
        (ControlOutcome.APPLIED, W.READY_STOP),
    ]
    second = c.resolve(W.RUNNING, [STOP, PAUSE])
    assert [(r.outcome, r.state) for r in second] == [
        (ControlOutcome.APPLIED, W.READY_STOP),
        (ControlOutcome.REJECTED, W.READY_STOP),
    ]
    assert second[1].reason == "a stop is under way"


def test_two_pauses_apply_once() -> None:
    out = c.resolve(W.RUNNING, [PAUSE, PAUSE])
    assert [r.outcome for r in out] == [ControlOutcome.APPLIED, ControlOutcome.REJECTED]


@pytest.mark.parametrize("start", list(W), ids=str)
@pytest.mark.parametrize("length", [1, 2, 3])
def test_resolution_is_a_fold_and_the_effective_state_its_end(start: W, length: int) -> None:
    # Every sequence, judged at once or one control at a time against the state the previous left,
    # resolves the same way: what the recorder checks and what the owner applies agree.
    for kinds in itertools.product(K, repeat=length):
        together = c.resolve(start, kinds)
        state, one_by_one = start, []
        for kind in kinds:
            [r] = c.resolve(state, [kind])
            one_by_one.append(r)
            state = r.state
        assert together == one_by_one
        assert c.effective_state(start, kinds) is state


def test_a_stop_of_a_stopping_instance_is_applied_without_moving_it() -> None:
    assert c.effective_state(W.READY_STOP, [STOP, STOP]) is W.READY_STOP
    assert [r.outcome for r in c.resolve(W.READY_STOP, [STOP])] == [ControlOutcome.APPLIED]


def test_clients_may_ask_where_a_driven_instance_can_move_or_a_stop_can_be_made_in_the_store() -> (
    None
):
    assert c.ACCEPTED_IN[PAUSE] == {W.RUNNING, W.FAILOVER}
    assert c.ACCEPTED_IN[STOP] == {
        W.RUNNING,
        W.READY_PAUSE,
        W.READY_STOP,
        W.FAILOVER,
        *tr.CAN_STOP_IN_STORE,
    }
    for kind, states in c.ACCEPTED_IN.items():
        for state in states - {W.FAILOVER} - tr.CAN_STOP_IN_STORE:
            assert c.target(state, kind) is not None  # the owner can apply what was accepted
