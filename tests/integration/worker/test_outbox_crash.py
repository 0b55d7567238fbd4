"""The outbox's log against kill -9: a process stores and settles events as fast as it can (with
frequent compactions) and is SIGKILLed mid-stream; a new outbox on the same directory must hold
every event the process had reported stored and not settled, and none it had reported settled."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dsched_worker.outbox import Outbox

# Runs in its own process: reports each operation on stdout only after it returned.
CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from datetime import UTC, datetime
    from pathlib import Path
    from dsched_worker import outbox as module
    from dsched_server.protocol.event import TaskEvent, TaskEventType

    module.COMPACT_BYTES = 4096  # compact every few dozen events
    fsync = sys.argv[2] == "fsync"

    async def main():
        box = module.Outbox(Path(sys.argv[1]), fsync=fsync)
        box.load()
        seq = 0
        while True:
            seq += 1
            event = TaskEvent(
                event_id=f"3-{seq}", task_instance_id=seq, attempt=1, workflow_instance_id=1,
                type=TaskEventType.RUNNING, event_time=datetime.now(UTC), pid=seq,
            )
            entry = module.OutboxEntry(event=event, worker_epoch=3, seq=seq, owner_address="m:1")
            await box.put(entry)
            print("put", seq, flush=True)
            if seq % 7:  # most are settled at once, every 7th stays pending
                box.remove(entry)
                print("done", seq, flush=True)

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("mode", ["plain", "fsync"])
def test_sigkill_mid_stream_loses_no_stored_event_and_revives_no_settled_one(
    tmp_path: Path, mode: str
) -> None:
    directory = tmp_path / "outbox"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(directory), mode],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    stored: set[int] = set()
    settled: set[int] = set()
    try:
        for line in child.stdout:
            op, seq = line.split()
            (stored if op == "put" else settled).add(int(seq))
            if len(stored) >= (3000 if mode == "plain" else 300):
                break
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait(timeout=30)
    for line in child.stdout:  # reported before the kill landed
        op, seq = line.split()
        (stored if op == "put" else settled).add(int(seq))
    child.stdout.close()

    found = {e.seq for e in Outbox(directory).load()}

    last = max(stored)
    in_limbo = {last} if last % 7 and last not in settled else set()  # its removal under way
    assert stored - settled - in_limbo <= found, sorted(stored - settled - found)[:10]
    assert not found & settled, sorted(found & settled)[:10]
    # At most the one event under way when the kill came is there unreported.
    assert len(found - stored) <= 1
    assert len(stored - settled) >= (3000 if mode == "plain" else 300) // 7 - 1
