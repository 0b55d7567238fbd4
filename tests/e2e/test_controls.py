"""Operations on instances: pause/resume, stop, rerun, recover (CLI, checked on exit codes, states
and attempts), execute-from-task, force success and dry run.

Each script appends ``task key attempt`` to a ledger, so the tests can tell which tasks really ran
again and which were left alone.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dsched import (
    Client,
    CommandType,
    FailedPrecondition,
    Shell,
    TaskDependType,
    TaskState,
    Workflow,
    WorkflowState,
)
from tests.e2e.conftest import (
    Ledger,
    Standalone,
    assert_ran,
    by_task,
    cli,
    events_of,
    instance_id_from_run,
    parse_table,
    wait_done,
    wait_for_file_sh,
    wait_for_task,
)


def _now() -> datetime:
    return datetime.now(UTC)


def _control(server: Standalone, action: str, instance_id: int, *states: str) -> None:
    """``dsched <action> <id>``: exit 0 and ``instance <id>  <STATE>`` with one of ``states``."""
    result = cli(server, action, str(instance_id))
    assert result.returncode == 0, f"dsched {action}: {result.stderr}"
    match = re.fullmatch(rf"instance {instance_id}  (\w+)\n", result.stdout)
    assert match and match.group(1) in states, result.stdout


def _diamond(project: str, name: str, ledger: Ledger, b_script: str = "") -> Workflow:
    """``a >> b >> c`` and ``a >> x``; every task writes to ``ledger``."""
    with Workflow(name, project=project) as wf:
        a = Shell("a", ledger.append())
        b = Shell("b", f"{ledger.append()}\n{b_script}")
        a >> b >> Shell("c", ledger.append())
        a >> Shell("x", ledger.append())
    return wf


@pytest.mark.timeout(90)
def test_pause_then_resume_via_cli(
    server: Standalone, client: Client, project: str, tmp_path: Path
) -> None:
    """Pause while ``a`` runs and ``d`` waits out its delay: ``a`` is not interrupted, ``d`` is
    paused without running, ``b`` (after ``a``) is not started; resume runs ``b`` and a new
    attempt of ``d``. Files sequence it: ``a`` runs until the test releases it, and ``d`` becomes
    ready (its delay starts) only once ``a`` is running, so no timing is assumed."""
    ledger = Ledger(tmp_path / "ledger")
    running, release = tmp_path / "a-running", tmp_path / "release-a"
    with Workflow("pausable", project=project) as wf:
        a = Shell("a", f"touch {running}\n{wait_for_file_sh(release)}{ledger.append()}")
        a >> Shell("b", ledger.append())
        gate = Shell("gate", wait_for_file_sh(running))
        gate >> Shell("d", ledger.append(), delay=5)
    wf.submit(client)
    started = cli(server, "run", "pausable", "--project", project)
    assert started.returncode == 0, started.stderr
    instance_id = instance_id_from_run(started.stdout)
    wait_for_task(client, instance_id, "d", TaskState.DELAY_EXECUTION)

    paused_at = _now()
    _control(server, "pause", instance_id, "READY_PAUSE")
    wait_for_task(client, instance_id, "d", TaskState.PAUSED)
    assert client.get_instance(instance_id).state is WorkflowState.READY_PAUSE
    release.touch()  # a may finish now
    paused = wait_done(client, instance_id, timeout=30)
    assert paused.state is WorkflowState.PAUSED
    tasks = by_task(client, instance_id)
    [first_a] = tasks["a"]
    assert first_a.state is TaskState.SUCCEEDED, "the running task is not interrupted by a pause"
    assert first_a.end_time is not None and first_a.end_time > paused_at
    assert "b" not in tasks, "nothing new starts once a pause was asked for"
    [d] = tasks["d"]
    assert d.state is TaskState.PAUSED and d.start_time is None
    assert ledger.counts() == {"a": 1}

    resumed_at = _now()
    _control(server, "resume", instance_id, "SUBMITTED", "RUNNING")
    final = wait_done(client, instance_id, timeout=30)
    assert final.state is WorkflowState.SUCCEEDED
    assert final.command_type is CommandType.RESUME
    tasks = by_task(client, instance_id)
    assert [t.id for t in tasks["a"]] == [first_a.id], "a finished in the pause: not run again"
    assert [t.id for t in tasks["gate"]] == [tasks["gate"][0].id]
    [b] = tasks["b"]
    assert b.state is TaskState.SUCCEEDED
    assert b.start_time is not None and b.start_time > resumed_at
    d_old, d_new = tasks["d"]
    assert (d_old.id, d_old.state, d_old.valid) == (d.id, TaskState.PAUSED, False)
    assert (d_new.attempt, d_new.state, d_new.valid) == (2, TaskState.SUCCEEDED, True)
    assert d_new.start_time is not None and d_new.start_time > resumed_at
    assert ledger.counts() == {"a": 1, "b": 1, "d": 1}
    assert [e.attempt for e in ledger.entries() if e.task == "d"] == [2]


def test_rerun_a_succeeded_instance_via_cli(
    server: Standalone, client: Client, project: str, tmp_path: Path
) -> None:
    ledger = Ledger(tmp_path / "ledger")
    wf = _diamond(project, "rerun", ledger)
    first = wf.run(client=client, timeout=60)
    assert first.state is WorkflowState.SUCCEEDED and first.run_times == 1
    before = by_task(client, first.id)

    _control(server, "rerun", first.id, "SUBMITTED", "RUNNING")
    final = wait_done(client, first.id)
    assert final.state is WorkflowState.SUCCEEDED
    assert (final.command_type, final.run_times) == (CommandType.RERUN, 2)
    assert final.start_time is not None and first.end_time is not None
    tasks = by_task(client, first.id)
    assert set(tasks) == {"a", "b", "c", "x"}
    for name, (old, new) in tasks.items():
        assert old.id == before[name][0].id and not old.valid, name
        assert (new.attempt, new.state, new.valid) == (2, TaskState.SUCCEEDED, True), name
        assert_ran(new)
        assert old.end_time is not None and new.start_time is not None
        assert new.start_time > old.end_time
    assert ledger.counts() == {"a": 2, "b": 2, "c": 2, "x": 2}
    assert len({e.key for e in ledger.entries()}) == 8

    shown = cli(server, "show", str(first.id))
    assert shown.returncode == 0, shown.stderr
    rows = parse_table(shown.stdout.split("\n\n", 1)[1])
    assert sorted(r["ATTEMPT"] for r in rows) == ["1*"] * 4 + ["2"] * 4  # * = superseded


def test_recover_a_failed_instance_via_cli(
    server: Standalone, client: Client, project: str, tmp_path: Path
) -> None:
    ledger = Ledger(tmp_path / "ledger")
    flag = tmp_path / "fixed"
    wf = _diamond(project, "recover", ledger, b_script=f"test -e {flag}")
    failed = wf.run(client=client, timeout=60)
    assert failed.state is WorkflowState.FAILED
    before = by_task(client, failed.id)
    assert "c" not in before and before["b"][0].state is TaskState.FAILED

    flag.touch()
    recovered_at = _now()
    _control(server, "recover", failed.id, "SUBMITTED", "RUNNING")
    final = wait_done(client, failed.id)
    assert final.state is WorkflowState.SUCCEEDED
    assert final.command_type is CommandType.RECOVER_FAILED
    tasks = by_task(client, failed.id)
    for name in ("a", "x"):  # succeeded before: untouched
        assert [(t.id, t.attempt, t.valid) for t in tasks[name]] == [(before[name][0].id, 1, True)]
    old_b, new_b = tasks["b"]
    assert (old_b.id, old_b.state, old_b.valid) == (before["b"][0].id, TaskState.FAILED, False)
    assert (new_b.attempt, new_b.state) == (2, TaskState.SUCCEEDED)
    [c] = tasks["c"]
    assert c.state is TaskState.SUCCEEDED and c.start_time is not None
    assert c.start_time > recovered_at
    assert ledger.counts() == {"a": 1, "x": 1, "b": 2, "c": 1}


def test_execute_from_task_via_sdk(client: Client, project: str, tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger")
    wf = _diamond(project, "from-task", ledger)
    first = wf.run(client=client, timeout=60)
    assert first.state is WorkflowState.SUCCEEDED
    before = by_task(client, first.id)

    again = client.execute_from_task(first.id, ["b"])
    assert again.id == first.id
    final = wait_done(client, first.id)
    assert final.state is WorkflowState.SUCCEEDED
    assert final.command_type is CommandType.EXECUTE_FROM_TASK
    tasks = by_task(client, first.id)
    for name in ("a", "x"):  # upstream of and beside the start task: untouched
        assert [t.id for t in tasks[name]] == [before[name][0].id]
    for name in ("b", "c"):  # the start task and its downstream (TASK_POST)
        assert [(t.attempt, t.valid) for t in tasks[name]] == [(1, False), (2, True)], name
        assert tasks[name][-1].state is TaskState.SUCCEEDED
    assert ledger.counts() == {"a": 1, "x": 1, "b": 2, "c": 2}

    # TASK_ONLY: just the named task.
    client.execute_from_task(first.id, ["b"], task_depend_type=TaskDependType.TASK_ONLY)
    assert wait_done(client, first.id).state is WorkflowState.SUCCEEDED
    tasks = by_task(client, first.id)
    assert [t.attempt for t in tasks["b"]] == [1, 2, 3]
    assert [t.attempt for t in tasks["c"]] == [1, 2] and tasks["c"][-1].valid
    assert ledger.counts() == {"a": 1, "x": 1, "b": 3, "c": 2}


def test_force_success_of_the_only_failed_task_via_sdk(client: Client, project: str) -> None:
    with Workflow("force", project=project) as wf:
        Shell("a", "true") >> Shell("bad", "exit 4")
        Shell("x", "true")
    failed = wf.run(client=client, timeout=60)
    assert failed.state is WorkflowState.FAILED
    tasks = {t.task_name: t for t in client.iter_task_instances(failed.id)}
    bad = tasks["bad"]
    assert bad.state is TaskState.FAILED

    with pytest.raises(FailedPrecondition):
        client.force_task_success(tasks["a"].id)  # only FAILED or KILLED attempts
    forced, instance = client.force_task_success(bad.id)
    assert forced.id == bad.id and forced.state is TaskState.FORCED_SUCCESS
    assert instance.state is WorkflowState.SUCCEEDED
    assert client.get_instance(failed.id).state is WorkflowState.SUCCEEDED
    assert client.get_task_instance(bad.id).state is TaskState.FORCED_SUCCESS
    events = events_of(client, failed.id)
    assert events[-2].task_state is TaskState.FORCED_SUCCESS and events[-2].task_name == "bad"
    assert events[-1].workflow_state is WorkflowState.SUCCEEDED
    with pytest.raises(FailedPrecondition):
        client.force_task_success(bad.id)  # already forced


def test_force_success_keeps_failed_when_downstream_never_ran(client: Client, project: str) -> None:
    """As in DolphinScheduler: the instance succeeds only if every task has run."""
    with Workflow("force-partial", project=project) as wf:
        Shell("bad", "exit 4") >> Shell("after", "true")
    failed = wf.run(client=client, timeout=60)
    [bad] = client.iter_task_instances(failed.id)
    forced, instance = client.force_task_success(bad.id)
    assert forced.state is TaskState.FORCED_SUCCESS
    assert instance.state is WorkflowState.FAILED


def test_dry_run_via_cli(server: Standalone, client: Client, project: str, tmp_path: Path) -> None:
    side_effect = tmp_path / "created"
    with Workflow("dry", project=project) as wf:
        Shell("touch", f"touch {side_effect}") >> Shell("again", f"touch {side_effect}.2")
    wf.submit(client)
    result = cli(server, "run", "dry", "--project", project, "--dry-run", "--wait")
    assert result.returncode == 0, result.stdout + result.stderr
    instance_id = instance_id_from_run(result.stdout)
    instance = client.get_instance(instance_id)
    assert instance.state is WorkflowState.SUCCEEDED and instance.dry_run
    tasks = by_task(client, instance_id)
    assert [t.state for ts in tasks.values() for t in ts] == [TaskState.SUCCEEDED] * 2
    assert not side_effect.exists() and not Path(f"{side_effect}.2").exists()
    shown = cli(server, "show", str(instance_id))
    assert re.search(r"^dry run:\s+yes$", shown.stdout, re.M), shown.stdout
