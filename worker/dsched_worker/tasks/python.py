"""The PYTHON task type: ``<interpreter> -u -c <script>`` in a fresh working directory, in its own
process group, with everything else a SHELL task has (:mod:`dsched_worker.tasks.script`).

The interpreter is the task's (an absolute path, or a command name found in the worker's ``PATH``,
which no parameter can change) or the worker's default: its ``python_interpreter`` setting, else
the Python the worker runs on. A script over 64 KiB or holding a NUL byte is written to
``script.py`` in the working directory and run from there. Parameters reach the script as
environment variables (``os.environ["dt"]``), never spliced into its text; a printed line
``${setValue(key=value)}`` sets an OUT parameter. ``-u`` and ``PYTHONUNBUFFERED=1`` (for Python
processes the script starts) make the output unbuffered, so the log follows the script live
instead of arriving in 8 KiB blocks or at exit.
"""

from __future__ import annotations

import sys

from dsched.python_spec import PythonSpec
from dsched_server.protocol.execution import TaskExecution
from dsched_worker.tasks.base import OutputSink, RunningTask, SpawnError
from dsched_worker.tasks.script import inline, start_script
from dsched_worker.tasks.spawner import Launch, Spawner

SCRIPT_NAME = "script.py"
_UNBUFFERED = {"PYTHONUNBUFFERED": "1"}


class PythonTaskType:
    """Starts PYTHON attempts with ``spawner``; ``interpreter`` is the worker's default (empty:
    ``sys.executable``)."""

    def __init__(self, *, spawner: Spawner, interpreter: str = "") -> None:
        self._spawner = spawner
        self._default = interpreter or sys.executable

    def launch(self, spec: PythonSpec) -> Launch:
        """The interpreter with the script inline with ``-c`` if it fits, else with the name of
        the script file written first."""
        python = spec.interpreter or self._default
        if inline(spec.script):
            argv = [python, "-u", "-c", spec.script]
            return Launch(argv=argv, program=python, env=_UNBUFFERED)
        argv = [python, "-u", SCRIPT_NAME]
        return Launch(argv=argv, program=python, file=(SCRIPT_NAME, spec.script), env=_UNBUFFERED)

    async def start(self, execution: TaskExecution, output: OutputSink) -> RunningTask:
        if not isinstance(execution.kind, PythonSpec):
            raise SpawnError(f"not a PYTHON task: {type(execution.kind).__name__}")
        return await start_script(self._spawner, execution, output, self.launch(execution.kind))
