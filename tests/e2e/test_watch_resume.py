"""The SDK resumes a watch at the cursor of a finished instance and learns its final state.

Through a real standalone: a client that lost its stream after the last event (or that remembers
the cursor from an earlier session) reopens it there and gets one frame, without events, that
carries the instance's final state, instead of a stream that ends with nothing.
"""

from __future__ import annotations

from dsched import Client, Shell, Workflow, WorkflowState
from tests.e2e.conftest import events_of


def _finished(client: Client, project: str, script: str) -> tuple[int, int]:
    """Runs a one-task workflow to its end; returns (instance id, last event sequence)."""
    with Workflow("once", project=project) as wf:
        Shell("only", script)
    instance = wf.run(client=client, wait=True, timeout=60)
    return instance.id, events_of(client, instance.id)[-1].sequence


def test_a_watch_resumed_at_the_end_reports_the_final_state(client: Client, project: str) -> None:
    for script, final in (("true", WorkflowState.SUCCEEDED), ("exit 4", WorkflowState.FAILED)):
        instance_id, last = _finished(client, f"{project}-{final.value.lower()}", script)
        frames = list(client.watch_frames(instance_id, after_sequence=last))
        assert [(f.events, f.cursor, f.state) for f in frames] == [((), last, final)]
        # The event iterator has nothing left to give, and ends rather than waiting.
        assert list(client.watch_instance(instance_id, after_sequence=last)) == []
