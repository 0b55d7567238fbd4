"""A task's environment on a real worker with real bash processes: the allow-list of the worker's
variables, reserved parameter names left out, OUT parameters with refused names dropped, how bash
is started, and an environment the OS refuses (E2BIG) failing the task while the worker carries
on."""

from __future__ import annotations

import os
import re
import resource
from pathlib import Path

from dsched.spec import MAX_PARAM_VALUE_BYTES
from dsched.v1 import enums_pb2
from dsched_server.protocol.event import TaskEventType
from dsched_worker.attempt import NO_PROCESS_EXIT_CODE
from dsched_worker.tasks.environment import identities

SUCCEEDED, FAILED = TaskEventType.SUCCEEDED, TaskEventType.FAILED
BASH_OWN = {"PWD", "SHLVL", "_", "OLDPWD"}  # variables bash itself exports to `env`


def read_env(path: Path) -> dict[str, str]:
    """What ``env -0 > path`` wrote."""
    entries = path.read_bytes().split(b"\0")
    return dict(e.decode().split("=", 1) for e in entries if e)


async def test_tasks_inherit_only_allowed_variables_of_the_worker(harness, tmp_path):
    marker = tmp_path / "bash-env-ran"
    bash_env = tmp_path / "evil.sh"
    bash_env.write_text(f"touch '{marker}'\n")
    environ = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "LC_TIME": "C",
        "SITE": "eu-1",
        "SPARK_HOME": "/opt/spark",
        "UNLISTED": "x",
        # What the worker itself may have been started with: never for its tasks.
        "BASH_ENV": str(bash_env),
        "LD_PRELOAD": str(tmp_path / "missing.so"),
        "PYTHONPATH": str(tmp_path),
        "DSCHED_DB_URL": "postgresql://dsched:secret@db/dsched",
        "DSCHED_TASK_NAME": "spoofed",
    }
    worker = await harness.worker(environ=environ, task_env_allow=("SITE", "SPARK_*"))
    dump = tmp_path / "env"
    execution = harness.execution(f"env -0 > '{dump}'", params={"day": "2024-05-06"})
    response = await harness.dispatch(worker, execution)
    done = await harness.master.wait_terminal(execution.task_instance_id)

    assert done.type is SUCCEEDED, done
    env = read_env(dump)
    inherited = {"PATH", "HOME", "LANG", "LC_TIME", "SITE", "SPARK_HOME"}
    stamped = execution.accepted_by(worker.address, worker.epoch)
    assert set(env) - BASH_OWN == inherited | {"day"} | set(identities(stamped))
    assert env["DSCHED_TASK_NAME"] == execution.task_name
    assert env["SITE"] == "eu-1" and env["day"] == "2024-05-06"
    assert not marker.exists()
    log_text = Path(response.log_path).read_text()
    assert "preload" not in log_text  # the loader never saw LD_PRELOAD


async def test_bash_starts_without_profile_or_rc_files(harness):
    worker = await harness.worker()
    execution = harness.execution("tr '\\0' ' ' < /proc/$$/cmdline; echo")
    response = await harness.dispatch(worker, execution)
    done = await harness.master.wait_terminal(execution.task_instance_id)

    assert done.type is SUCCEEDED
    lines = Path(response.log_path).read_text().splitlines()
    # The script is bash's -c argument (see test_worker_tasks), then $0.
    assert any(" --noprofile --norc -c " in line for line in lines), lines
    assert any(line.endswith(" script.sh ") for line in lines), lines


async def test_reserved_parameters_of_a_stored_definition_are_left_out_with_a_note(
    harness, tmp_path
):
    # The API refuses these names; a definition stored before a name became reserved can still
    # bring one: the task runs without it and its log says so.
    marker = tmp_path / "pwned"
    dump = tmp_path / "env"
    params = {
        "BASH_ENV": f"$(touch '{marker}')",
        "PATH": str(tmp_path),
        "ld_preload": "/nonexistent.so",
        "DSCHED_ATTEMPT": "99",
        "ok": "1",
    }
    worker = await harness.worker()
    execution = harness.execution(f"env -0 > '{dump}'", params=params)
    response = await harness.dispatch(worker, execution)
    assert response.outcome == enums_pb2.DISPATCH_OUTCOME_ACCEPTED
    done = await harness.master.wait_terminal(execution.task_instance_id)

    assert done.type is SUCCEEDED, done
    env = read_env(dump)
    assert env["ok"] == "1" and env["DSCHED_ATTEMPT"] == "1"
    assert "BASH_ENV" not in env and "ld_preload" not in env
    assert env["PATH"] == os.environ["PATH"]
    assert not marker.exists()
    log_text = Path(response.log_path).read_text()
    for name in ("BASH_ENV", "PATH", "ld_preload", "DSCHED_ATTEMPT"):
        assert f"[dsched] parameter not set: parameter name {name!r} is reserved: " in log_text


async def test_out_parameters_with_refused_names_are_dropped_with_a_note(harness, tmp_path):
    marker = tmp_path / "pwned"
    script = "\n".join(
        [
            f"echo '${{setValue(BASH_ENV=$(touch {marker}))}}'",
            "echo '${setValue(Ld_Preload=/tmp/x.so)}'",
            "echo '${setValue(not-a-name=1)}'",
            "echo '${setValue(rows=42)}'",
        ]
    )
    worker = await harness.worker()
    execution = harness.execution(script)
    response = await harness.dispatch(worker, execution)
    done = await harness.master.wait_terminal(execution.task_instance_id)

    assert done.type is SUCCEEDED
    assert dict(done.out_params) == {"rows": "42"}
    log_text = Path(response.log_path).read_text()
    assert "[dsched] OUT parameter dropped: parameter name 'BASH_ENV' is reserved: " in log_text
    assert "[dsched] OUT parameter dropped: parameter name 'Ld_Preload' is reserved: " in log_text
    assert "[dsched] OUT parameter dropped: parameter name 'not-a-name' is not an identifier" in (
        log_text
    )
    assert not marker.exists()


def exec_limit() -> int:
    """Bytes of arguments and environment Linux accepts in execve: a quarter of the stack limit,
    at most 6 MiB (3/4 of the kernel's 8 MiB stack default)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_STACK)
    cap = 6 * 1024 * 1024
    return cap if soft == resource.RLIM_INFINITY else min(cap, soft // 4)


async def test_an_environment_the_os_refuses_fails_the_task_and_the_worker_carries_on(harness):
    # Each value is as large as a parameter may be; together they exceed what execve accepts.
    count = exec_limit() // MAX_PARAM_VALUE_BYTES + 2
    params = {f"P{i}": "v" * MAX_PARAM_VALUE_BYTES for i in range(count)}
    worker = await harness.worker(slots=1)  # the next task runs only if the slot was freed
    too_big = harness.execution("echo never", params=params)
    response = await harness.dispatch(worker, too_big)
    assert response.outcome == enums_pb2.DISPATCH_OUTCOME_ACCEPTED
    failed = await harness.master.wait_terminal(too_big.task_instance_id)

    assert failed.type is FAILED
    assert failed.exit_code == NO_PROCESS_EXIT_CODE
    found = re.search(r"too large \((\d+) bytes in (\d+) variables;", failed.message)
    assert found, failed.message
    assert int(found[1]) > exec_limit() and int(found[2]) > count
    log_text = Path(response.log_path).read_text()
    assert "[dsched] could not start: the operating system refused" in log_text
    assert "\nnever\n" not in log_text

    after = harness.execution("echo next")
    response = await harness.dispatch(worker, after)
    done = await harness.master.wait_terminal(after.task_instance_id)
    assert done.type is SUCCEEDED
    assert "next\n" in Path(response.log_path).read_text()
