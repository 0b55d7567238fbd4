"""The shell task type: ``bash --noprofile --norc -c <script> script.sh`` in a fresh working
directory, in its own process group.

The script reaches bash verbatim as the argument of ``-c``, with ``script.sh`` as its ``$0`` (the
name bash's own messages give it: ``script.sh: line 3: ...``), and runs with
``<exec_root>/<workflow_instance_id>/<task_instance_id>`` as its working directory (removed after
the attempt: :mod:`dsched_worker.workdirs`). A script too large for one argument or holding a NUL
byte is written to ``script.sh`` in the working directory and run from there
(:mod:`dsched_worker.tasks.script`). Stdin is ``/dev/null`` either way. Parameters are never
spliced into the script text: they reach it as environment variables
(:mod:`dsched_worker.tasks.environment`: an allow-list of the worker's variables, the parameters,
dsched's identities), and ``${name}`` expands with bash's own quoting rules. ``--noprofile
--norc`` keep start-up files out (a non-interactive bash reads none today; the flags say so and
hold if that changes); ``BASH_ENV`` and the other variables bash reads at start-up are reserved
names that no parameter can set.

An environment the operating system refuses (``E2BIG``: more than a quarter of the stack limit in
arguments and environment, or one variable over 128 KiB) fails the attempt with that reason; the
worker carries on (:mod:`dsched_worker.tasks.spawner`).

Output (stdout and stderr merged) goes to the attempt's log as it arrives and is scanned for
``setValue`` markers (:mod:`dsched_worker.tasks.out_params`). Process-group handling, including the
clean-up of children left behind by the script, is in :mod:`dsched_worker.process`.
"""

from __future__ import annotations

from dsched.spec import ShellSpec
from dsched_server.protocol.execution import TaskExecution
from dsched_worker.tasks.base import OutputSink, RunningTask, SpawnError
from dsched_worker.tasks.script import INLINE_MAX, inline, start_script
from dsched_worker.tasks.spawner import Launch, Spawner

__all__ = ["INLINE_MAX", "SCRIPT_NAME", "ShellTaskType"]

SCRIPT_NAME = "script.sh"


class ShellTaskType:
    """Starts shell attempts with ``spawner`` and ``bash`` (an absolute path, resolved once with
    the worker's own PATH, so no task can change which bash runs)."""

    def __init__(self, *, spawner: Spawner, bash: str) -> None:
        self._spawner = spawner
        self._bash = bash

    def launch(self, script: str) -> Launch:
        """bash with ``script`` inline with ``-c`` if it fits (see the module), else with the name
        of the script file written first."""
        if inline(script):
            argv = [self._bash, "--noprofile", "--norc", "-c", script, SCRIPT_NAME]
            return Launch(argv=argv, program=self._bash)
        argv = [self._bash, "--noprofile", "--norc", SCRIPT_NAME]
        return Launch(argv=argv, program=self._bash, file=(SCRIPT_NAME, script))

    async def start(self, execution: TaskExecution, output: OutputSink) -> RunningTask:
        if not isinstance(execution.kind, ShellSpec):
            raise SpawnError(f"not a shell task: {type(execution.kind).__name__}")
        launch = self.launch(execution.kind.script)
        return await start_script(self._spawner, execution, output, launch)
