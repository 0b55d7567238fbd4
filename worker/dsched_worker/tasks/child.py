"""Task types that run a *dsched child program*: dsched's own code (an HTTP request, a SQL
statement) in a process of the attempt's, started as
``<python> -I -u -m dsched_worker.programs.<name>`` (:mod:`dsched_worker.programs`).

How a task type uses it::

    class HttpTaskType:
        def __init__(self, children: ChildPrograms) -> None:
            self._children = children

        async def start(self, execution, output):
            spec = {"url": ..., "method": ...}  # JSON values; may hold secrets
            program = "dsched_worker.programs.http"
            return await self._children.start(program, spec, execution, output)

and the program (``dsched_worker/programs/http.py``) ends with
``main(run)`` from :mod:`dsched_worker.programs.runtime`, where ``run(spec, params)`` returns the
OUT parameters.

The life cycle is a shell task's: the program leads its own process group in the attempt's working
directory (:mod:`dsched_worker.tasks.spawner`, :mod:`dsched_worker.process`), its stdout and stderr
stream into the log as they come, and kill, timeout and retries are the runner's as for any task.
Its spec reaches it as JSON on **stdin** (``{"spec": ..., "params": ...}``), never in its arguments
or environment, which other users of the host can read in ``/proc``. Its environment is any task's
(the allow-list of the worker's variables, the parameters, dsched's identities); ``-I`` (isolated
mode) keeps ``PYTHON*`` variables, the user's site directory and the working directory out of the
interpreter, so nothing a task left behind or a parameter set changes which code runs; ``-u``
makes its output unbuffered, so the log is live.

The output of a program is *not* scanned for ``${setValue(...)}``: it logs what others wrote
(response bodies, rows), and a remote party must not set OUT parameters. The program's OUT
parameters come from its result file instead, read here once it has exited
(:mod:`dsched_worker.programs.runtime` has the protocol) and checked with the same rules as
``setValue`` ones (:meth:`~dsched_worker.tasks.out_params.OutParamParser.offer`).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Mapping
from pathlib import Path

from dsched.spec import MAX_PARAMS_BYTES
from dsched_server.protocol.execution import TaskExecution
from dsched_worker.process import ProcessGroup
from dsched_worker.programs.runtime import RESULT_FILE
from dsched_worker.tasks.base import OutputSink, RunningTask, TaskExit
from dsched_worker.tasks.out_params import OutParamParser
from dsched_worker.tasks.spawner import GroupRun, Launch, Spawner

# A result file larger than this is not read: JSON escaping can take a value to six times its
# size, and the OUT parameters themselves are bounded by MAX_PARAMS_BYTES.
MAX_RESULT_BYTES = 6 * MAX_PARAMS_BYTES + 64 * 1024


class ChildRun(GroupRun):
    """A running child program: its process group, and its result file read when it is gone."""

    def __init__(self, group: ProcessGroup, result: Path, output: OutputSink) -> None:
        super().__init__(group)
        self._result = result
        self._output = output

    async def wait(self) -> TaskExit:
        returncode = await self._group.wait()
        found, problem = await asyncio.to_thread(take_result, self._result)
        if problem:
            self._output.note(problem)
        parser = OutParamParser(note=self._output.note)
        for key, value in found.items():
            parser.offer(key, value)
        return TaskExit(
            returncode=returncode, out_params=parser.close(), ended=self._group.exited_at
        )


def take_result(path: Path) -> tuple[dict[str, str], str]:
    """The OUT parameters of the result file at ``path`` (removed: the working directory of an
    attempt that leaves nothing is reused), and a note if the file could not be used. No file:
    the program set none."""
    try:
        with path.open("rb") as file:
            data = file.read(MAX_RESULT_BYTES + 1)
        path.unlink()
    except FileNotFoundError:
        return {}, ""
    except OSError as exc:
        return {}, f"OUT parameters dropped: cannot read the program's result: {exc}"
    if len(data) > MAX_RESULT_BYTES:
        return {}, f"OUT parameters dropped: the program's result is over {MAX_RESULT_BYTES} bytes"
    try:
        doc = json.loads(data)
    except ValueError as exc:
        return {}, f"OUT parameters dropped: the program's result is not JSON: {exc}"
    if not isinstance(doc, dict):
        return {}, "OUT parameters dropped: the program's result is not a JSON object"
    found = {k: v if isinstance(v, str) else json.dumps(v) for k, v in doc.items()}
    return found, ""


class ChildPrograms:
    """Starts child programs with ``spawner``, run by ``python`` (default: the worker's own
    interpreter, whose installation holds the programs)."""

    def __init__(self, spawner: Spawner, python: str = sys.executable) -> None:
        self._spawner = spawner
        self._python = python

    def argv(self, program: str) -> list[str]:
        """The command line of ``program`` (a module name; no task data: see the module)."""
        return [self._python, "-I", "-u", "-m", program]

    async def start(
        self,
        program: str,
        spec: Mapping[str, object],
        execution: TaskExecution,
        output: OutputSink,
    ) -> RunningTask:
        """Starts ``program`` (e.g. ``dsched_worker.programs.http``) for ``execution`` with
        ``spec`` (JSON values) and the attempt's parameters on its stdin. Raises
        :class:`~dsched_worker.tasks.base.SpawnError` if it cannot start."""
        request = {"spec": dict(spec), "params": dict(execution.params)}
        # ensure_ascii: a lone surrogate in a value still makes valid bytes (and valid JSON).
        payload = json.dumps(request, ensure_ascii=True).encode("ascii")
        launch = Launch(argv=self.argv(program), program=program, stdin=payload)
        cwd = self._spawner.work_dir(execution)
        group = await self._spawner.spawn(launch, execution, output, output.append)
        return ChildRun(group, cwd / RESULT_FILE, output)
