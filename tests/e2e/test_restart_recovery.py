"""Crash recovery: SIGKILL a standalone in the middle of a run, start a new one on the same data
directory, and check the promise of ARCHITECTURE.md §4: at-least-once execution,
exactly-once *recorded* completion. The new master adopts the instance (its owner epoch is dead)
and finishes it; the attempt that was running on the dead worker is marked NEED_FAULT_TOLERANCE and
runs again as a new attempt. Tasks that had finished before the crash must not run again, and no
task may be lost.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from dsched import Client, Shell, TaskState, Workflow, WorkflowState
from tests.e2e.conftest import (
    Ledger,
    alive,
    assert_all_gone,
    assert_ran,
    by_task,
    events_of,
    eventually,
    server_errors,
    start_standalone,
    wait_for_file_sh,
    wait_for_task,
)

DOWNSTREAM = ("d0", "d1", "d2", "d3")


@pytest.mark.timeout(150)
def test_sigkill_mid_run_then_restart_recovers_the_instance(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    ledger = Ledger(tmp_path / "ledger")
    long_pids, release = tmp_path / "long-pids", tmp_path / "release"
    with Workflow("crash", project="e2e-restart") as wf:
        pre = Shell("pre", ledger.append())
        side = Shell("side", ledger.append())  # independent, done before the crash
        # Runs until the test releases it (after the crash): long enough, whatever the machine.
        long = Shell(
            "long", f"echo $$ >> {long_pids}\n{wait_for_file_sh(release)}{ledger.append()}"
        )
        pre >> long >> [Shell(name, ledger.append()) for name in DOWNSTREAM]
        side >> long

    first = start_standalone(data_dir)
    with Client.connect(first.address) as client:
        old_start = client.server_info().start_time
        run = wf.run(client=client, wait=False)
        wait_for_task(client, run.id, "long", TaskState.RUNNING)
        eventually(long_pids.exists, what="the long task to start")
        before = by_task(client, run.id)
    assert ledger.counts() == {"pre": 1, "side": 1}
    assert {n: [t.state for t in ts] for n, ts in before.items()} == {
        "pre": [TaskState.SUCCEEDED],
        "side": [TaskState.SUCCEEDED],
        "long": [TaskState.RUNNING],
    }

    assert first.kill() == -9
    crashed_at = time.monotonic()
    second = start_standalone(data_dir, port=first.port)
    # The same cluster listener as before: the restarted worker's outbox holds events addressed to
    # it (any free port, remembered in the data directory).
    assert second.cluster_address == first.cluster_address
    up_at = time.monotonic()
    release.touch()  # the new attempt of `long` (and the orphaned old one) may finish now
    try:
        with Client.connect(second.address) as client:
            new_start = client.server_info().start_time
            final = client.wait(run.id, timeout=90)
            recovered_at = time.monotonic()
            after = by_task(client, run.id)
            events = events_of(client, run.id)
        print(
            f"\nrecovery: {recovered_at - crashed_at:.1f}s from SIGKILL to SUCCEEDED "
            f"({up_at - crashed_at:.1f}s restart, {recovered_at - up_at:.1f}s to finish)"
        )
    finally:
        stop_took = second.assert_clean_stop()
    assert stop_took < 30
    assert not server_errors(second.output()), second.output()[-4000:]

    assert final.state is WorkflowState.SUCCEEDED, final.state_reason
    # A new incarnation (clients see no epochs: they are fencing tokens) drove it to the end.
    assert old_start is not None and new_start is not None and new_start > old_start
    assert final.host == second.address
    assert any(e.kind == "FAILOVER" for e in events), [e.kind for e in events]

    # Exactly one accepted success per task, and every task done.
    for name in ("pre", "side", "long", *DOWNSTREAM):
        accepted = [t for t in after[name] if t.valid and t.state.successful]
        assert len(accepted) == 1, (name, after[name])
    # Finished before the crash: untouched.
    for name in ("pre", "side"):
        assert [t.id for t in after[name]] == [before[name][0].id]
    # The attempt on the dead worker: NEED_FAULT_TOLERANCE, superseded by a new one.
    old, *_, new = after["long"]
    assert old.id == before["long"][0].id
    assert (old.state, old.valid) == (TaskState.NEED_FAULT_TOLERANCE, False)
    assert new.attempt > old.attempt and new.state is TaskState.SUCCEEDED
    assert new.start_time is not None and new.start_time >= new_start  # run by the new worker
    for ti in [new, *(after[name][0] for name in DOWNSTREAM)]:
        assert_ran(ti)

    # The ledger: nothing lost, no duplicates of what had finished or only ran after recovery.
    # The old attempt of `long` may finish unsupervised (its process outlived the SIGKILLed
    # worker): a raw duplicate at most, with its own idempotency key, and never accepted.
    orphans = [int(p) for p in long_pids.read_text().split()[:1]]
    assert_all_gone(orphans, timeout=15)
    counts = ledger.counts()
    entries = ledger.entries()
    assert set(counts) == {"pre", "side", "long", *DOWNSTREAM}, "a task was lost"
    assert {n: counts[n] for n in ("pre", "side", *DOWNSTREAM)} == dict.fromkeys(
        ("pre", "side", *DOWNSTREAM), 1
    )
    long_runs = [e for e in entries if e.task == "long"]
    assert 1 <= len(long_runs) <= 2
    assert len({e.key for e in long_runs}) == len(long_runs), "two runs shared a key"
    assert new.attempt in {e.attempt for e in long_runs}
    raw = Counter(e.task for e in entries) - Counter(dict.fromkeys(counts, 1))
    print(f"raw duplicates (allowed, not accepted): {dict(raw) or 'none'}")
    orphan_ran = old.attempt in {e.attempt for e in long_runs}
    print(f"the orphaned attempt {old.attempt} ran to completion: {orphan_ran}")
    assert not any(alive(p) for p in orphans)
