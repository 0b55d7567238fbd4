"""Retries (attempt numbering, retry interval) and the failure strategies CONTINUE and END."""

from __future__ import annotations

from datetime import timedelta
from itertools import pairwise
from pathlib import Path

import pytest

from dsched import Client, FailureStrategy, Shell, TaskState, Workflow, WorkflowState
from tests.e2e.conftest import (
    Ledger,
    assert_all_gone,
    by_task,
    events_of,
    read_pids,
    spawner,
    wait_for_file_sh,
)

RETRY_INTERVAL = timedelta(seconds=1)


def _fails_until(counter: Path, succeed_on: int, ledger: Ledger) -> str:
    """A script that records its attempt, then fails until it has run ``succeed_on`` times."""
    return (
        f"{ledger.append()}\n"
        f"n=$(( $(cat {counter} 2>/dev/null || echo 0) + 1 )); echo $n > {counter}\n"
        f'echo "run $n, attempt $DSCHED_ATTEMPT"\n'
        f"[ $n -ge {succeed_on} ]\n"
    )


def test_retries_until_success(client: Client, project: str, tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger")
    with Workflow("flaky", project=project) as wf:
        Shell(
            "flaky",
            _fails_until(tmp_path / "counter", 3, ledger),
            retries=2,
            retry_interval=RETRY_INTERVAL,
        ) >> Shell("after", ledger.append())
    final = wf.run(client=client, timeout=60)
    assert final.state is WorkflowState.SUCCEEDED

    tries = by_task(client, final.id)["flaky"]
    assert [t.attempt for t in tries] == [1, 2, 3]
    assert [t.retry_times for t in tries] == [0, 1, 2]
    assert [t.state for t in tries] == [TaskState.FAILED, TaskState.FAILED, TaskState.SUCCEEDED]
    assert [t.exit_code for t in tries] == [1, 1, 0]
    assert [t.valid for t in tries] == [False, False, True]
    for before, after in pairwise(tries):
        assert before.end_time is not None and after.start_time is not None
        assert after.start_time - before.end_time >= RETRY_INTERVAL, "retried too early"
        assert after.submit_time is not None and after.submit_time >= before.end_time

    retries = [e for e in events_of(client, final.id) if e.kind == "RETRY_SCHEDULED"]
    assert [e.task_instance_id for e in retries] == [tries[0].id, tries[1].id]
    # One run per attempt, each with its own idempotency key; the successor ran once.
    entries = ledger.entries()
    assert [(e.task, e.attempt) for e in entries] == [
        ("flaky", 1),
        ("flaky", 2),
        ("flaky", 3),
        ("after", 1),
    ]
    assert len({e.key for e in entries}) == 4


def test_exhausted_retries_fail_the_instance(client: Client, project: str, tmp_path: Path) -> None:
    with Workflow("hopeless", project=project) as wf:
        Shell("hopeless", "echo trying; exit 7", retries=1, retry_interval=0) >> Shell(
            "after", "echo after"
        )
    final = wf.run(client=client, timeout=60)
    assert final.state is WorkflowState.FAILED
    assert "hopeless" in final.state_reason
    tasks = by_task(client, final.id)
    assert set(tasks) == {"hopeless"}, "the successor of a failed task must not be created"
    assert [(t.attempt, t.state, t.exit_code) for t in tasks["hopeless"]] == [
        (1, TaskState.FAILED, 7),
        (2, TaskState.FAILED, 7),
    ]
    assert [t.valid for t in tasks["hopeless"]] == [False, True]


def _branches(project: str, slow_script: str, started: Path, failing: Path) -> Workflow:
    """``bad >> after_bad`` next to an independent ``slow`` branch. ``bad`` fails as soon as
    ``slow`` has created ``started``, so the failure always meets a running ``slow``; it creates
    ``failing`` just before it exits."""
    bad = f"{wait_for_file_sh(started)}touch {failing}\nexit 3\n"
    with Workflow("branches", project=project) as wf:
        Shell("bad", bad) >> Shell("after_bad", "echo must not run")
        Shell("slow", slow_script)
    return wf


def test_continue_lets_independent_branches_finish(
    client: Client, project: str, tmp_path: Path
) -> None:
    started, failing, marker = tmp_path / "started", tmp_path / "failing", tmp_path / "done"
    # slow keeps running for 2 s after bad failed.
    slow_script = f"touch {started}\n{wait_for_file_sh(failing)}sleep 2\ntouch {marker}\n"
    wf = _branches(project, slow_script, started, failing)
    final = wf.run(client=client, timeout=60, failure_strategy=FailureStrategy.CONTINUE)
    assert final.state is WorkflowState.FAILED
    assert final.failure_strategy is FailureStrategy.CONTINUE
    tasks = by_task(client, final.id)
    assert set(tasks) == {"bad", "slow"}, "after_bad must never be created"
    [bad], [slow] = tasks["bad"], tasks["slow"]
    assert bad.state is TaskState.FAILED and bad.exit_code == 3
    assert slow.state is TaskState.SUCCEEDED and marker.exists()
    assert bad.end_time is not None and slow.end_time is not None
    assert slow.end_time > bad.end_time + timedelta(seconds=1.5), "slow was cut short"
    assert final.end_time is not None and final.end_time >= slow.end_time


@pytest.mark.timeout(90)
def test_end_kills_the_other_branches(client: Client, project: str, tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    wf = _branches(project, spawner(pid_file), pid_file, tmp_path / "failing")
    final = wf.run(client=client, timeout=60, failure_strategy=FailureStrategy.END)
    assert final.state is WorkflowState.FAILED
    tasks = by_task(client, final.id)
    assert set(tasks) == {"bad", "slow"}, "after_bad must never be created"
    [bad], [slow] = tasks["bad"], tasks["slow"]
    assert bad.state is TaskState.FAILED and bad.exit_code == 3
    assert slow.state is TaskState.KILLED
    assert bad.end_time is not None and slow.end_time is not None
    assert slow.end_time - bad.end_time < timedelta(seconds=5), "slow was not killed quickly"
    assert final.end_time is not None and final.end_time - bad.end_time < timedelta(seconds=5)
    pids = read_pids(pid_file, count=4)
    assert_all_gone(pids, pgid=pids[-1], timeout=10)
