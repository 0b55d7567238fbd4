"""Pause and stop through the application layer, on instances no runner of this master drives:
the paths a scheduler or another master's caller takes (recording, stop in the store, refusal)."""

from __future__ import annotations

import pytest

from dsched.errors import FailedPrecondition, IllegalTransition
from dsched.states import InstanceEventKind, TaskState, WorkflowState
from dsched_server.app import controls
from dsched_server.app.context import AppContext
from dsched_server.core.controls import ControlKind, ControlOutcome
from dsched_server.store import controls as control_repo
from dsched_server.store import events, instances

from .conftest import commands_of, make_workflow, ran, read, started

W = WorkflowState


@pytest.mark.parametrize("end", [W.SUCCEEDED, W.FAILED, W.STOPPED])
@pytest.mark.parametrize("kind", [ControlKind.PAUSE, ControlKind.STOP])
async def test_a_control_of_a_finished_instance_is_refused_and_records_nothing(
    app: AppContext, end: WorkflowState, kind: ControlKind
) -> None:
    await make_workflow(app)
    instance, _ = await ran(app, end, {"extract": TaskState.SUCCEEDED})
    before = await read(app, lambda c: events.after(c, instance.id, 0))

    with pytest.raises(IllegalTransition) as refused:
        await controls.control(app, instance.id, kind, "req-1", wait=0)

    assert refused.value.reason == "ILLEGAL_TRANSITION"
    assert refused.value.metadata == {
        "instance": str(instance.id),
        "state": end.value,
        "action": kind.lower(),
    }
    assert await read(app, lambda c: control_repo.find(c, "req-1")) is None
    assert await read(app, lambda c: events.after(c, instance.id, 0)) == before
    assert (await read(app, lambda c: instances.get_instance(c, instance.id))).state is end


async def test_a_stop_of_a_submitted_instance_is_made_in_the_store(app: AppContext) -> None:
    await make_workflow(app)
    instance = await started(app)
    watched = app.notifier.signal(instance.id)

    done = await controls.stop(app, instance.id, "stop-1")

    assert done.applied
    assert done.instance.state is W.STOPPED
    assert done.instance.state_reason == "stopped by user"
    assert await commands_of(app, instance.id) == []  # it never starts
    recorded = await read(app, lambda c: control_repo.find(c, "stop-1"))
    assert recorded is not None and recorded.outcome is ControlOutcome.APPLIED
    assert watched.is_set()

    again = await controls.stop(app, instance.id, "stop-1")  # the same control, found again

    assert again.applied and again.instance == done.instance


async def test_a_request_id_names_one_control(app: AppContext) -> None:
    await make_workflow(app)
    instance = await started(app)
    await controls.stop(app, instance.id, "stop-1")

    with pytest.raises(FailedPrecondition) as refused:
        await controls.pause(app, instance.id, "stop-1")

    assert refused.value.reason == "REQUEST_ID_REUSED"
    assert refused.value.metadata["action"] == "stop"


async def test_a_pause_for_an_unreachable_owner_is_recorded_and_pending(app: AppContext) -> None:
    await make_workflow(app)
    running, _ = await ran(app, W.RUNNING, {"extract": TaskState.RUNNING})

    done = await controls.pause(app, running.id, "pause-1", wait=0)

    assert not done.applied  # its owner is not registered here: it applies it when it can
    assert done.instance.state is W.RUNNING
    recorded = await read(app, lambda c: control_repo.find(c, "pause-1"))
    assert recorded is not None and recorded.pending
    assert (recorded.kind, recorded.requested_by) == (ControlKind.PAUSE, app.address)
    last = (await read(app, lambda c: events.after(c, running.id, 0)))[-1]
    assert last.kind is InstanceEventKind.CONTROL

    # Judged against the state the instance will have once the pending pause is applied.
    with pytest.raises(IllegalTransition) as refused:
        await controls.pause(app, running.id, "pause-2", wait=0)
    assert refused.value.metadata["state"] == W.READY_PAUSE.value
    stop = await controls.stop(app, running.id, "stop-1", wait=0)
    assert not stop.applied
    pending = await read(app, lambda c: control_repo.pending(c, running.id))
    assert [p.request_id for p in pending] == ["pause-1", "stop-1"]
