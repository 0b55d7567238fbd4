"""Group commit survives a crash: SIGKILL a standalone while one-task runs are being started and
completed by several clients at once (so the runners' batches share transactions), start a new
one on the same data directory, and check that what the API reported before the crash is still
there, and that nothing was duplicated:

* every instance a StartWorkflow answered exists, once per request id (a start whose answer the
  crash swallowed, retried with its request id, gets the one instance or a new one, never two);
* an instance reported SUCCEEDED is still SUCCEEDED, with its one attempt, whose task ran once;
* every instance ends SUCCEEDED with exactly one valid successful attempt.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from dsched import Client, Shell, Workflow, WorkflowState
from tests.e2e.conftest import Ledger, server_errors, start_standalone

STARTERS = 3
SUCCEEDED_BEFORE_CRASH = 40  # runs the API reported finished before the SIGKILL


class _Observed:
    """What the API answered before the crash (shared by the client threads)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.started: dict[str, int] = {}  # request id -> instance id
        self.unanswered: list[str] = []  # request ids whose StartWorkflow the crash cut off
        self.states: dict[int, set[WorkflowState]] = defaultdict(set)

    def succeeded(self) -> set[int]:
        with self.lock:
            return {i for i, seen in self.states.items() if WorkflowState.SUCCEEDED in seen}


def _start(address: str, who: int, seen: _Observed, crash: threading.Event) -> None:
    with Client.connect(address) as client:
        n = 0
        while not crash.is_set():
            request_id = f"crash-{who}-{n}"
            n += 1
            try:
                instance = client.start_workflow("e2e-group", "one", request_id=request_id)
            except Exception:
                with seen.lock:
                    seen.unanswered.append(request_id)
                return
            with seen.lock:
                seen.started[request_id] = instance.id
                seen.states[instance.id].add(instance.state)


def _watch(address: str, seen: _Observed, crash: threading.Event) -> None:
    with Client.connect(address) as client:
        while not crash.is_set():
            try:
                page = client.list_instances(project="e2e-group", workflow="one", page_size=200)
            except Exception:
                return
            with seen.lock:
                for instance in page.items:
                    seen.states[instance.id].add(instance.state)
            time.sleep(0.02)


@pytest.mark.timeout(240)
def test_sigkill_while_runs_start_and_finish_loses_and_duplicates_nothing(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    ledger = Ledger(tmp_path / "ledger")
    with Workflow("one", project="e2e-group") as wf:
        Shell("only", ledger.append())

    first = start_standalone(data_dir)
    with Client.connect(first.address) as client:
        wf.submit(client)
    seen, crash = _Observed(), threading.Event()
    threads = [
        threading.Thread(target=_start, args=(first.address, who, seen, crash), daemon=True)
        for who in range(STARTERS)
    ]
    threads.append(threading.Thread(target=_watch, args=(first.address, seen, crash), daemon=True))
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 90
    while len(seen.succeeded()) < SUCCEEDED_BEFORE_CRASH and time.monotonic() < deadline:
        time.sleep(0.05)
    # Killed while the clients still start runs and the runners still commit.
    assert first.kill() == -9
    crash.set()
    for thread in threads:
        thread.join(timeout=60)
    with seen.lock:
        started = dict(seen.started)
        unanswered = list(seen.unanswered)
        states = {i: set(s) for i, s in seen.states.items()}
    succeeded = {i for i, s in states.items() if WorkflowState.SUCCEEDED in s}
    assert len(succeeded) >= SUCCEEDED_BEFORE_CRASH, "too few runs finished before the crash"
    unfinished = [i for i, s in states.items() if not s & {WorkflowState.SUCCEEDED}]
    print(
        f"\nbefore the SIGKILL: {len(started)} runs started, {len(succeeded)} reported "
        f"SUCCEEDED, {len(unfinished)} not yet, {len(unanswered)} starts unanswered"
    )

    second = start_standalone(data_dir, port=first.port)
    try:
        with Client.connect(second.address) as client:
            for request_id in unanswered:  # as a client retries: the same request id
                started[request_id] = client.start_workflow(
                    "e2e-group", "one", request_id=request_id
                ).id
            # The same request ids answer the same instances.
            for request_id in list(started)[:: max(1, len(started) // 20)]:
                again = client.start_workflow("e2e-group", "one", request_id=request_id)
                assert again.id == started[request_id], request_id
            final = {i: client.wait(i, timeout=120) for i in sorted(set(started.values()))}
            stored = list(client.iter_instances(project="e2e-group", workflow="one"))
            attempts = {
                i: list(client.list_task_instances(i, include_superseded=True).items) for i in final
            }
    finally:
        second.assert_clean_stop()
    assert not server_errors(second.output()), second.output()[-4000:]

    # Nothing duplicated: one instance per request id, and no instance nobody started.
    assert len(set(started.values())) == len(started)
    assert sorted(i.id for i in stored) == sorted(started.values())
    # Nothing lost: every instance reported exists and ends SUCCEEDED, one accepted attempt each.
    assert set(states) <= set(final)
    for instance_id, instance in final.items():
        assert instance.state is WorkflowState.SUCCEEDED, (instance_id, instance.state_reason)
        accepted = [t for t in attempts[instance_id] if t.valid and t.state.successful]
        assert len(accepted) == 1, attempts[instance_id]
    # Reported SUCCEEDED before the crash: that run, its one attempt, its task run once.
    runs = Counter(int(e.key.split("-")[0]) for e in ledger.entries())
    for instance_id in succeeded:
        assert len(attempts[instance_id]) == 1, attempts[instance_id]
        assert runs[instance_id] == 1, (instance_id, runs[instance_id])
    # Every run's task ran; a run cut by the crash may have run twice (at least once), no more.
    assert set(runs) == set(final)
    assert max(runs.values()) <= 2
