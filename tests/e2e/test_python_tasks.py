"""PYTHON tasks through a real ``dsched standalone``: an ``@task`` function's OUT parameters reach a
downstream task, the log follows a running script live, a running script is killed by a stop and
by its timeout, and the worker's default interpreter comes from its setting."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsched import Client, Python, Shell, TaskState, Workflow, WorkflowState, task
from tests.e2e.conftest import (
    Standalone,
    assert_all_gone,
    by_task,
    clean_env,
    start_standalone,
    wait_done,
    wait_for_task,
)


@task(retries=0)
def summarise(dt: str, rows: str, scale: str = "2") -> dict[str, Any]:
    import json
    import os

    print(f"summarising {rows} rows of {dt} in {os.getcwd()}")
    return {"total": str(int(rows) * int(scale)), "meta": json.dumps({"dt": dt}), "n": 7}


@pytest.fixture(scope="module")
def python_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    data = tmp_path_factory.mktemp("python-server")
    env = clean_env(
        DSCHED_LOG_LEVEL="INFO",
        DSCHED_CPU_THRESHOLD="1",
        DSCHED_PYTHON_INTERPRETER=sys.executable,
    )
    server = start_standalone(data, env=env)
    yield server
    server.assert_clean_stop()


@pytest.fixture
def client(python_server: Standalone) -> Iterator[Client]:
    with Client.connect(python_server.address) as c:
        yield c


def test_a_task_function_sets_out_params_for_its_downstream_task(
    client: Client, tmp_path: Path
) -> None:
    seen = tmp_path / "seen"
    with Workflow("decorated", project="py", params={"dt": "2024-05-06"}) as wf:
        rows = Shell("rows", "echo '${setValue(rows=21)}'")
        total = summarise()
        check = Python(
            "check",
            "import os, pathlib\n"
            "text = os.environ['total'] + ' ' + os.environ['meta']\n"
            f"pathlib.Path({str(seen)!r}).write_text(text)\n"
            "print('${setValue(checked=yes)}')\n",
        )
        rows >> total >> check
    done = wf.run(client=client, timeout=90)

    assert done.state is WorkflowState.SUCCEEDED, done
    assert seen.read_text() == '42 {"dt": "2024-05-06"}'
    tasks = by_task(client, done.id)
    assert dict(tasks["summarise"][0].out_params) == {
        "total": "42",
        "meta": '{"dt": "2024-05-06"}',
        "n": "7",
    }
    assert dict(tasks["check"][0].out_params) == {"checked": "yes"}
    log = b"".join(c.data for c in client.tail_log(tasks["summarise"][0].id)).decode()
    assert "summarising 21 rows of 2024-05-06" in log


def test_a_missing_parameter_fails_with_a_message(client: Client) -> None:
    with Workflow("missing", project="py") as wf:
        summarise(params={"dt": "x"})
    done = wf.run(client=client, timeout=60)

    assert done.state is WorkflowState.FAILED
    (attempt,) = by_task(client, done.id)["summarise"]
    log = b"".join(c.data for c in client.tail_log(attempt.id)).decode()
    assert "error: summarise() needs the parameter(s) rows" in log


def test_the_log_is_live_and_a_stop_kills_the_script(client: Client, tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    script = (
        "import os, time\n"
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "print('started', flush=False)\n"  # unbuffered: it must reach the log without a flush
        "time.sleep(120)\n"
        "print('never')\n"
    )
    with Workflow("longrun", project="py") as wf:
        Python("sleeper", script)
    wf.submit(client)
    instance = client.start_workflow("py", "longrun")
    running = wait_for_task(client, instance.id, "sleeper", TaskState.RUNNING, timeout=60)

    got = b""
    deadline = time.monotonic() + 30
    for chunk in client.tail_log(running.task_instance_id, follow=True):
        got += chunk.data
        if b"started\n" in got or time.monotonic() > deadline:
            break
    assert b"started\n" in got  # seen while the script still sleeps
    assert client.get_task_instance(running.task_instance_id).state is TaskState.RUNNING

    client.stop_instance(instance.id)
    done = wait_done(client, instance.id)
    assert done.state is WorkflowState.STOPPED
    assert client.get_task_instance(running.task_instance_id).state is TaskState.KILLED
    assert_all_gone([int(pid_file.read_text())])


def test_a_timeout_kills_the_script(client: Client) -> None:
    with Workflow("slow", project="py") as wf:
        Python("slow", "import time\nprint('waiting')\ntime.sleep(120)\n", timeout=1)
    done = wf.run(client=client, timeout=60)

    assert done.state is WorkflowState.FAILED
    (attempt,) = by_task(client, done.id)["slow"]
    assert attempt.state is TaskState.FAILED
    assert "timed out" in attempt.state_reason


def test_a_failed_attempt_is_retried(client: Client) -> None:
    script = (
        "import os, sys\n"
        "print('attempt', os.environ['DSCHED_ATTEMPT'])\n"
        "sys.exit(0 if os.environ['DSCHED_ATTEMPT'] == '2' else 3)\n"
    )
    with Workflow("flaky", project="py") as wf:
        Python("flaky", script, retries=1)
    done = wf.run(client=client, timeout=60)

    assert done.state is WorkflowState.SUCCEEDED
    first, second = by_task(client, done.id)["flaky"]
    assert (first.state, first.exit_code) == (TaskState.FAILED, 3)
    assert (second.state, second.exit_code) == (TaskState.SUCCEEDED, 0)
