"""PYTHON attempts on a real worker: inline or through ``script.py``, unbuffered, parameters from
the environment, OUT parameters from ``setValue`` lines, the interpreter the task names, and one
that does not exist."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dsched.python_spec import PythonSpec
from dsched_server.protocol.event import TaskEventType
from dsched_worker.tasks.script import INLINE_MAX

SUCCEEDED, FAILED = TaskEventType.SUCCEEDED, TaskEventType.FAILED


@pytest.mark.parametrize("padding", [0, INLINE_MAX], ids=["inline", "through a file"])
async def test_a_script_runs_with_its_parameters_and_sets_out_params(harness, padding):
    worker = await harness.worker()
    script = "\n".join(
        [
            f"# {'x' * padding}",
            "import os, sys",
            "print('argv0=' + sys.argv[0])",
            "print('unbuffered_env=' + os.environ.get('PYTHONUNBUFFERED', '-'))",
            "print('${setValue(greeting=' + os.environ['greeting'] + ')}')",
            "print('files=' + ' '.join(sorted(os.listdir('.'))))",
        ]
    )
    execution = harness.execution(
        "unused", kind=PythonSpec(script=script), params={"greeting": "héllo $x"}
    )
    response = await harness.dispatch(worker, execution)
    done = await harness.master.wait_terminal(execution.task_instance_id)

    assert done.type is SUCCEEDED, Path(response.log_path).read_text()
    assert dict(done.out_params) == {"greeting": "héllo $x"}
    text = Path(response.log_path).read_text()
    assert ("argv0=script.py\n" if padding else "argv0=-c\n") in text
    assert "unbuffered_env=1\n" in text
    assert f"files={'script.py' if padding else ''}\n" in text


async def test_the_task_names_its_interpreter_and_a_missing_one_fails(harness):
    worker = await harness.worker()
    named = harness.execution(
        "unused",
        kind=PythonSpec(script="import sys; print(sys.executable)", interpreter=sys.executable),
    )
    response = await harness.dispatch(worker, named)
    assert (await harness.master.wait_terminal(named.task_instance_id)).type is SUCCEEDED
    assert sys.executable in Path(response.log_path).read_text()

    missing = harness.execution(
        "unused", kind=PythonSpec(script="pass", interpreter="/nonexistent/python9")
    )
    await harness.dispatch(worker, missing)
    done = await harness.master.wait_terminal(missing.task_instance_id)
    assert done.type is FAILED
    assert "/nonexistent/python9" in done.message
