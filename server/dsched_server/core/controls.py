"""User controls of a running workflow instance (pause, stop) as pure rules (ARCHITECTURE.md §4).

Any master accepts a control; it is recorded in the store and applied by the master that drives the
instance (now, or after adopting it). Between the two the instance's state may move on, so the same
rules decide twice: when a control is *recorded* (against the state the instance will have once the
controls recorded before it are applied) and when it is *applied* (against the state it has then).
Controls of one instance are applied in the order they were recorded, so two conflicting controls
(a pause, then a stop) always resolve the same way: each is judged against the state its
predecessors left.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from dsched.errors import FailedPrecondition, IllegalTransition
from dsched.states import WorkflowState
from dsched_server.core import transitions

W = WorkflowState


class ControlKind(StrEnum):
    PAUSE = "PAUSE"
    STOP = "STOP"


class ControlOutcome(StrEnum):
    """What became of a recorded control (persisted names; never rename)."""

    PENDING = "PENDING"  # recorded, not applied yet
    APPLIED = "APPLIED"  # the owner applied it (READY_PAUSE / READY_STOP, or what they led to)
    REJECTED = "REJECTED"  # illegal once the owner came to apply it (the instance had moved on)


# Where a client may ask for each control. In a state a master drives (or drives again after a
# failover) it is recorded for the owner, which judges it again when it applies it; a stop of an
# instance nobody drives (SUBMITTED, PAUSED, ...) is made in the store at once.
ACCEPTED_IN = {
    ControlKind.PAUSE: transitions.CAN_PAUSE | {W.FAILOVER},
    ControlKind.STOP: transitions.CAN_STOP_VIA_OWNER
    | transitions.CAN_STOP_IN_STORE
    | {W.READY_STOP, W.FAILOVER},
}


def target(state: WorkflowState, kind: ControlKind) -> WorkflowState | None:
    """The state ``kind`` moves a driven instance from ``state`` to; None if it is illegal there.

    A stop of an instance already stopping joins that stop (READY_STOP stays READY_STOP).
    """
    if kind is ControlKind.PAUSE:
        return W.READY_PAUSE if state in transitions.CAN_PAUSE else None
    if state is W.READY_STOP:
        return W.READY_STOP
    return W.READY_STOP if state in transitions.CAN_STOP_VIA_OWNER else None


@dataclass(frozen=True, slots=True)
class Resolution:
    """One control judged in order: its outcome and the state the instance has after it."""

    kind: ControlKind
    outcome: ControlOutcome
    state: WorkflowState
    reason: str


def resolve(state: WorkflowState, kinds: Iterable[ControlKind]) -> list[Resolution]:
    """Judges ``kinds`` (in recording order) against an instance in ``state``: each is APPLIED if
    legal in the state its predecessors left, else REJECTED (and changes nothing)."""
    out: list[Resolution] = []
    for kind in kinds:
        after = target(state, kind)
        if after is None:
            out.append(Resolution(kind, ControlOutcome.REJECTED, state, refusal(state, kind)))
        else:
            state = after
            out.append(Resolution(kind, ControlOutcome.APPLIED, state, ""))
    return out


def effective_state(state: WorkflowState, pending: Iterable[ControlKind]) -> WorkflowState:
    """The state an instance in ``state`` has once ``pending`` controls are applied."""
    for resolution in resolve(state, pending):
        state = resolution.state
    return state


def refusal(state: WorkflowState, kind: ControlKind) -> str:
    """Why ``kind`` cannot be applied in ``state`` (for the error and the recorded outcome)."""
    if state.terminal:
        return f"the instance ended {state} before the {kind.lower()} was applied"
    if kind is ControlKind.PAUSE and state is W.READY_PAUSE:
        return "a pause is already under way"
    if kind is ControlKind.PAUSE and state is W.READY_STOP:
        return "a stop is under way"
    return f"cannot {kind.lower()} an instance in state {state}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlRecord:
    """A recorded control request (see the store's ``control_requests``)."""

    id: int
    request_id: str
    instance_id: int
    kind: ControlKind
    requested_by: str
    create_time: datetime
    outcome: ControlOutcome = ControlOutcome.PENDING
    outcome_state: WorkflowState | None = None
    outcome_reason: str = ""
    applied_by: int = 0
    apply_time: datetime | None = None

    @property
    def pending(self) -> bool:
        return self.outcome is ControlOutcome.PENDING


def refused(control: ControlRecord) -> IllegalTransition:
    """The error for a control the owner found illegal (FAILED_PRECONDITION)."""
    state = control.outcome_state or W.RUNNING
    return IllegalTransition(
        f"cannot {control.kind.lower()} workflow instance {control.instance_id}: "
        f"{control.outcome_reason}",
        metadata={
            "instance": str(control.instance_id),
            "state": state.value,
            "action": control.kind.lower(),
        },
    )


def reused(known: ControlRecord) -> FailedPrecondition:
    """The error for a request id already used for another control (or another instance)."""
    return FailedPrecondition(
        f"request_id {known.request_id!r} was already used to {known.kind.lower()} workflow "
        f"instance {known.instance_id}",
        reason="REQUEST_ID_REUSED",
        metadata={
            "request_id": known.request_id,
            "instance": str(known.instance_id),
            "action": known.kind.lower(),
        },
    )
