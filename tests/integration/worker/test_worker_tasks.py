"""Shell attempts end to end: a real Worker runs real bash processes and reports to a fake
master."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import grpc
import pytest
from grpc import aio

from dsched.options import TimeoutStrategy
from dsched.v1 import enums_pb2, log_service_pb2
from dsched_server.protocol.event import TaskEventType
from dsched_worker.tasks.shell import INLINE_MAX

RUNNING, SUCCEEDED, FAILED = TaskEventType.RUNNING, TaskEventType.SUCCEEDED, TaskEventType.FAILED


async def test_success_exports_params_and_collects_out_params(harness):
    worker = await harness.worker()
    hostile = "hello world; $(touch pwned) `touch pwned2` ${HOME}"
    script = "\n".join(
        [
            'echo "key=$DSCHED_IDEMPOTENCY_KEY"',
            'echo "ids=$DSCHED_TASK_INSTANCE_ID/$DSCHED_WORKFLOW_INSTANCE_ID/$DSCHED_ATTEMPT"',
            'echo "name=$DSCHED_TASK_NAME cwd=$(pwd)"',
            "echo '${setValue(answer=42)}'",
            'printf "#{setValue(greeting=%s)}\\n" "$greeting"',
            'echo "to stderr" >&2',
        ]
    )
    execution = harness.execution(script, params={"greeting": hostile})
    response = await harness.dispatch(worker, execution)
    assert response.outcome == enums_pb2.DISPATCH_OUTCOME_ACCEPTED
    assert response.worker_epoch == worker.epoch > 0

    done = await harness.master.wait_terminal(execution.task_instance_id)

    assert done.type is SUCCEEDED
    assert done.exit_code == 0
    assert dict(done.out_params) == {"answer": "42", "greeting": hostile}
    running = harness.master.received[0].event
    assert running.type is RUNNING and running.pid > 0
    assert running.log_path == response.log_path
    workdir = harness.data_dir / "exec" / "77" / str(execution.task_instance_id)
    assert not (workdir / "pwned").exists() and not (workdir / "pwned2").exists()
    text = Path(response.log_path).read_text()
    assert f"key={execution.idempotency_key}\n" in text
    assert f"ids={execution.task_instance_id}/77/1\n" in text
    assert f"name={execution.task_name} cwd={workdir}\n" in text
    assert "to stderr\n" in text
    assert text.startswith("[dsched] task ")


async def test_non_zero_exit_is_failed_with_its_code(harness):
    worker = await harness.worker()
    execution = harness.execution("echo about to fail\nexit 3")
    await harness.dispatch(worker, execution)

    done = await harness.master.wait_terminal(execution.task_instance_id)

    assert done.type is FAILED
    assert done.exit_code == 3
    assert "code 3" in done.message


async def test_dispatch_twice_runs_once(harness, gate):
    worker = await harness.worker()
    ledger = harness.tmp_path / "ledger"
    g = gate("gate")
    script = f'echo ran >> "{ledger}"\nread _ < "{g.path}"'
    execution = harness.execution(script)

    first = await harness.dispatch(worker, execution)
    again_running = await harness.dispatch(worker, execution)
    g.open()
    await harness.master.wait_terminal(execution.task_instance_id)
    again_finished = await harness.dispatch(worker, execution)

    assert first.outcome == enums_pb2.DISPATCH_OUTCOME_ACCEPTED
    for again in (again_running, again_finished):
        assert again.outcome == enums_pb2.DISPATCH_OUTCOME_ALREADY_ACCEPTED
        assert again.log_path == first.log_path
        assert again.worker_epoch == first.worker_epoch
    assert ledger.read_text() == "ran\n"
    assert harness.master.types_of(execution.task_instance_id) == [RUNNING, SUCCEEDED]


async def test_dry_run_succeeds_without_running(harness):
    worker = await harness.worker()
    marker = harness.tmp_path / "ran"
    execution = harness.execution(f'touch "{marker}"', dry_run=True)
    response = await harness.dispatch(worker, execution)

    done = await harness.master.wait_terminal(execution.task_instance_id)

    assert done.type is SUCCEEDED
    assert harness.master.types_of(execution.task_instance_id) == [RUNNING, SUCCEEDED]
    assert not marker.exists()
    assert "dry run" in Path(response.log_path).read_text()


@pytest.mark.parametrize("padding", [0, INLINE_MAX], ids=["inline", "through a file"])
async def test_the_script_is_script_sh_to_bash_whether_inline_or_a_file(harness, padding):
    # A script up to INLINE_MAX bytes reaches bash as an argument, a larger one as a file: the
    # script sees the same $0, stdin, working directory and error messages either way.
    worker = await harness.worker()
    script = "\n".join(
        [
            f": {'x' * padding}",
            'echo "zero=$0"',
            'echo "dir=$(pwd)"',
            'echo "stdin=$(readlink /proc/self/fd/0)"',
            "echo \"files=$(ls -A | tr '\\n' ' ')\"",
            "no_such_command_here",
            "exit 3",
        ]
    )
    execution = harness.execution(script)
    response = await harness.dispatch(worker, execution)
    done = await harness.master.wait_terminal(execution.task_instance_id)

    assert done.type is FAILED and done.exit_code == 3
    text = Path(response.log_path).read_text()
    cwd = harness.data_dir / "exec" / str(execution.workflow_instance_id)
    assert "zero=script.sh\n" in text
    assert f"dir={cwd / str(execution.task_instance_id)}\n" in text
    assert "stdin=/dev/null\n" in text
    assert f"files={'script.sh ' if padding else ''}\n" in text
    assert "script.sh: line 6: no_such_command_here: command not found" in text


async def test_spawn_failure_is_failed_with_a_message(harness):
    harness.data_dir.mkdir()
    (harness.data_dir / "exec").write_text("not a directory")
    worker = await harness.worker()
    execution = harness.execution("echo never")
    await harness.dispatch(worker, execution)

    done = await harness.master.wait_terminal(execution.task_instance_id)

    assert done.type is FAILED
    assert done.message.startswith("could not start")
    assert harness.master.types_of(execution.task_instance_id) == [FAILED]


async def test_timeout_fail_kills_and_reports_failed(harness):
    worker = await harness.worker()
    execution = harness.execution(
        "echo started\nsleep 30\necho never",
        timeout=timedelta(seconds=0.5),
        timeout_strategy=TimeoutStrategy.WARN_FAIL,
    )
    response = await harness.dispatch(worker, execution)

    done = await harness.master.wait_terminal(execution.task_instance_id)

    assert done.type is FAILED
    assert done.message == "timed out after 0.5s"
    assert done.exit_code == 128 + 15  # SIGTERM
    assert "never" not in Path(response.log_path).read_text()


async def test_timeout_warn_does_not_kill(harness):
    worker = await harness.worker()
    execution = harness.execution(
        "sleep 0.6\necho survived",
        timeout=timedelta(seconds=0.1),
        timeout_strategy=TimeoutStrategy.WARN,
    )
    response = await harness.dispatch(worker, execution)

    done = await harness.master.wait_terminal(execution.task_instance_id)

    assert done.type is SUCCEEDED
    assert "survived" in Path(response.log_path).read_text()


async def test_slots_bound_concurrency_and_queued_attempts_all_run(harness):
    worker = await harness.worker(slots=2)
    ledger = harness.tmp_path / "ledger"
    script = f'echo "start" >> "{ledger}"\nsleep 0.3\necho "end" >> "{ledger}"'
    executions = [harness.execution(script) for _ in range(6)]

    for execution in executions:
        response = await harness.dispatch(worker, execution)
        assert response.outcome == enums_pb2.DISPATCH_OUTCOME_ACCEPTED
    for execution in executions:
        assert (await harness.master.wait_terminal(execution.task_instance_id)).type is SUCCEEDED

    running = peak = 0
    for line in ledger.read_text().split():
        running += 1 if line == "start" else -1
        peak = max(peak, running)
    assert peak == 2
    assert ledger.read_text().count("end") == 6
    assert worker.runner.slots_in_use == 0


async def test_full_queue_rejects_without_side_effects(harness, gate):
    worker = await harness.worker(slots=1, max_queued=1)
    g = gate("gate")
    running = harness.execution(f'read _ < "{g.path}"')
    queued = harness.execution("echo queued")
    rejected = harness.execution("echo rejected")

    outcomes = [(await harness.dispatch(worker, e)).outcome for e in (running, queued, rejected)]

    assert outcomes == [
        enums_pb2.DISPATCH_OUTCOME_ACCEPTED,
        enums_pb2.DISPATCH_OUTCOME_ACCEPTED,
        enums_pb2.DISPATCH_OUTCOME_REJECTED_FULL,
    ]
    assert worker.logs.resolve(rejected.task_instance_id) is None
    g.open()
    assert (await harness.master.wait_terminal(queued.task_instance_id)).type is SUCCEEDED
    assert harness.master.terminal(rejected.task_instance_id) is None


async def test_another_attempt_number_for_a_live_task_instance_is_refused(harness, gate):
    worker = await harness.worker()
    g = gate("gate")
    execution = harness.execution(f'read _ < "{g.path}"')
    await harness.dispatch(worker, execution)

    with pytest.raises(aio.AioRpcError) as err:
        await harness.dispatch(worker, replace(execution, attempt=2))
    g.open()
    await harness.master.wait_terminal(execution.task_instance_id)

    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert [r.event.attempt for r in harness.master.received] == [1, 1]


async def test_stop_kills_running_tasks_reports_nothing_and_drops_queued(harness, gate, group_gone):
    worker = await harness.worker(slots=1)
    g = gate("gate")
    marker = harness.tmp_path / "queued-ran"
    running = harness.execution(f'read _ < "{g.path}"')
    queued = harness.execution(f'touch "{marker}"')
    await harness.dispatch(worker, running)
    await harness.dispatch(worker, queued)
    await harness.master.wait_for(lambda m: len(m.applied) == 1)
    pgid = harness.master.received[0].event.pid

    await worker.stop(grace=0.2)
    accepted = await harness.dispatch(await harness.worker(), harness.execution("true"))

    assert harness.master.types_of(running.task_instance_id) == [RUNNING]
    assert harness.master.types_of(queued.task_instance_id) == []
    assert not marker.exists()
    assert accepted.outcome == enums_pb2.DISPATCH_OUTCOME_ACCEPTED  # a new incarnation
    await group_gone(pgid)
    log_text = Path(worker.logs.resolve(running.task_instance_id)).read_text()
    assert "result not reported" in log_text


async def test_the_events_are_dated_by_the_process_start_and_exit(harness):
    """RUNNING carries the time the process had started and the end the time its exit was seen,
    not the times the worker got round to reporting them: the task's own first and last clock
    readings fall between the two."""
    worker = await harness.worker()
    execution = harness.execution(
        'echo "first $EPOCHREALTIME"\nsleep 0.2\necho "last $EPOCHREALTIME"'
    )
    await harness.dispatch(worker, execution)
    done = await harness.master.wait_terminal(execution.task_instance_id)
    running = next(
        r.event
        for r in harness.master.received
        if r.event.task_instance_id == execution.task_instance_id and r.event.type is RUNNING
    )
    chunk = await harness.log_stub(worker).ReadTaskLog(
        log_service_pb2.ReadTaskLogRequest(task_instance_id=execution.task_instance_id)
    )
    said = {
        words[0]: float(words[1])
        for words in (line.split() for line in chunk.data.decode().splitlines())
        if len(words) == 2 and words[0] in ("first", "last")
    }

    assert done.type is SUCCEEDED
    assert running.event_time.timestamp() <= said["first"]
    assert said["last"] <= done.event_time.timestamp()
    assert done.event_time - running.event_time < timedelta(seconds=2)
