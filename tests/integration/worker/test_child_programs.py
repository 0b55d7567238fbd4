"""dsched child programs (:mod:`dsched_worker.tasks.child`, :mod:`dsched_worker.programs.runtime`)
with real processes: the spec arrives on stdin and nowhere else, the output streams into the log
without being scanned for ``setValue``, OUT parameters come from the program's result, a failure
is one line, and a running program is killed with its group."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dsched.spec import ShellSpec
from dsched_server.protocol.execution import TaskExecution
from dsched_worker.programs.runtime import RESULT_FILE
from dsched_worker.tasks.child import ChildPrograms
from dsched_worker.tasks.spawner import Spawner

SECRET = "pa55-w0rd-in-the-spec"

# A program as a module would be, run from a file (the test's modules are not importable by an
# isolated interpreter). It reports where the secret can be seen, echoes a setValue marker that
# must not count, and returns OUT parameters.
PROGRAM = """
import os, sys, time
from dsched_worker.programs.runtime import ProgramError, log, main

def run(spec, params):
    own = open("/proc/self/cmdline", "rb").read() + open("/proc/self/environ", "rb").read()
    log("secret visible in /proc: " + str(spec["password"].encode() in own))
    log("greeting param: " + params.get("greeting", "-"))
    log("${setValue(injected=yes)}")
    if spec.get("fail"):
        raise ProgramError("the server said no")
    if spec.get("hang"):
        log("hanging")
        time.sleep(60)
    return {"answer": "42", "body": "line one\\nline two )} done", "bad name": "x"}

main(run)
"""


class _Log:
    def __init__(self) -> None:
        self.data = bytearray()
        self.notes: list[str] = []
        self.grew = asyncio.Event()

    def append(self, data: bytes) -> None:
        self.data += data
        self.grew.set()

    def note(self, text: str) -> None:
        self.notes.append(text)

    def make(self) -> None:
        pass  # nothing on disk

    @property
    def text(self) -> str:
        return self.data.decode()


class _FilePrograms(ChildPrograms):
    """Runs ``PROGRAM`` from a file instead of a module, with the same interpreter flags."""

    def __init__(self, spawner: Spawner, path: Path) -> None:
        super().__init__(spawner)
        self._path = path

    def argv(self, program: str) -> list[str]:
        return [sys.executable, "-I", "-u", str(self._path)]


@pytest.fixture
def programs(tmp_path: Path) -> _FilePrograms:
    path = tmp_path / "program.py"
    path.write_text(PROGRAM)
    spawner = Spawner(exec_root=tmp_path / "exec", base_env=dict(os.environ))
    return _FilePrograms(spawner, path)


def _execution(params: dict[str, str] | None = None) -> TaskExecution:
    return TaskExecution(
        task_instance_id=5,
        attempt=1,
        workflow_instance_id=9,
        workflow_code=1,
        workflow_version=1,
        task_name="t",
        idempotency_key="9-t-1",
        kind=ShellSpec(script="unused"),
        owner_address="127.0.0.1:1",
        owner_epoch=1,
        submit_time=datetime(2024, 1, 1, tzinfo=UTC),
        params=params or {},
    )


async def test_the_spec_travels_on_stdin_and_out_params_come_from_the_result(
    programs: _FilePrograms, tmp_path: Path
) -> None:
    log = _Log()
    spec = {"password": SECRET}
    run = await programs.start("x", spec, _execution({"greeting": "héllo"}), log)
    done = await asyncio.wait_for(run.wait(), 30)

    assert done.returncode == 0, log.text
    assert "secret visible in /proc: False\n" in log.text
    assert "greeting param: héllo\n" in log.text
    assert "${setValue(injected=yes)}" in log.text  # logged, but not an OUT parameter
    assert dict(done.out_params) == {"answer": "42", "body": "line one\nline two )} done"}
    assert any("'bad name'" in note for note in log.notes), log.notes
    assert not (tmp_path / "exec" / "9" / "5" / RESULT_FILE).exists()


async def test_a_program_error_is_one_line_and_exit_status_1(programs: _FilePrograms) -> None:
    log = _Log()
    run = await programs.start("x", {"password": SECRET, "fail": True}, _execution(), log)
    done = await asyncio.wait_for(run.wait(), 30)

    assert done.returncode == 1
    assert log.text.endswith("error: the server said no\n")
    assert "Traceback" not in log.text
    assert dict(done.out_params) == {}


async def test_a_running_program_is_killed_with_its_group(programs: _FilePrograms) -> None:
    log = _Log()
    run = await programs.start("x", {"password": SECRET, "hang": True}, _execution(), log)
    while "hanging\n" not in log.text:
        log.grew.clear()
        await asyncio.wait_for(log.grew.wait(), 30)
    await run.kill(grace=5)
    done = await asyncio.wait_for(run.wait(), 30)

    assert done.returncode == -signal.SIGTERM
    with pytest.raises(ProcessLookupError):
        os.killpg(run.pid, 0)


async def test_unreadable_input_exits_2(tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-I",
        "-c",
        "from dsched_worker.programs.runtime import main; main(lambda s, p: {})",
        stdin=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=tmp_path,
    )
    _, err = await asyncio.wait_for(proc.communicate(b'["not", "an", "object"]'), 30)
    assert proc.returncode == 2
    assert err.decode().startswith("error: cannot read the task from stdin: ")
