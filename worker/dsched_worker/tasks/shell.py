"""The shell task type: ``bash --noprofile --norc -c <script> script.sh`` in a fresh working
directory, in its own process group.

The script reaches bash verbatim as the argument of ``-c``, with ``script.sh`` as its ``$0`` (the
name bash's own messages give it: ``script.sh: line 3: ...``), and runs with
``<exec_root>/<workflow_instance_id>/<task_instance_id>`` as its working directory (removed after
the attempt: :mod:`dsched_worker.workdirs`). No script file per attempt: creating one was a file
system round trip per task on the worker's hot path. A script too large for one argument
(:data:`INLINE_MAX` bytes; Linux allows 128 KiB, shared with the environment's quarter of the
stack) or holding a NUL byte is written to ``script.sh`` in the working directory and run from
there as before. Stdin is ``/dev/null`` either way. Parameters are never spliced into the script
text: they reach it as
environment variables (:mod:`dsched_worker.tasks.environment`: an allow-list of the worker's
variables, the parameters, dsched's identities), and ``${name}`` expands with bash's own quoting
rules. ``--noprofile --norc`` keep start-up files out (a non-interactive bash reads none today; the
flags say so and hold if that changes); ``BASH_ENV`` and the other variables bash reads at start-up
are reserved names that no parameter can set.

An environment the operating system refuses (``E2BIG``: more than a quarter of the stack limit in
arguments and environment, or one variable over 128 KiB) fails the attempt with that reason; the
worker carries on.

Output (stdout and stderr merged) goes to the attempt's log as it arrives and is scanned for
``setValue`` markers (:mod:`dsched_worker.tasks.out_params`). Process-group handling, including the
clean-up of children left behind by the script, is in :mod:`dsched_worker.process`.
"""

from __future__ import annotations

import errno
from collections.abc import Iterable, Mapping
from pathlib import Path

from dsched.spec import ShellSpec
from dsched_server.protocol.execution import TaskExecution
from dsched_worker.process import GroupRecords, ProcessGroup
from dsched_worker.tasks import environment
from dsched_worker.tasks.base import OutputSink, RunningTask, SpawnError, TaskExit
from dsched_worker.tasks.out_params import OutParamParser
from dsched_worker.workdirs import WorkDirs, make_dir, work_dir

SCRIPT_NAME = "script.sh"
# Scripts up to this size (UTF-8 bytes) go to bash as an argument, larger ones through a file.
INLINE_MAX = 64 * 1024


class ShellRun:
    """A running shell attempt: its process group and the OUT parameters seen in its output."""

    def __init__(self, group: ProcessGroup, parser: OutParamParser) -> None:
        self._group = group
        self._parser = parser

    @property
    def pid(self) -> int:
        return self._group.pid

    async def wait(self) -> TaskExit:
        returncode = await self._group.wait()
        return TaskExit(returncode=returncode, out_params=self._parser.close())

    async def kill(self, grace: float) -> None:
        await self._group.kill(grace)


class ShellTaskType:
    """Starts shell attempts under ``exec_root`` with ``bash`` (an absolute path, resolved once with
    the worker's own PATH, so no task can change which bash runs). ``base_env`` is the worker's
    environment; tasks inherit only its variables that ``env_allow`` names. ``records``: where
    the process groups of running attempts are recorded (the worker's reaper kills them if the
    worker dies). ``workdirs``: makes the attempts' working directories (from its pool of empty
    ones), else each is made with ``mkdir``."""

    def __init__(
        self,
        *,
        exec_root: Path,
        base_env: Mapping[str, str],
        bash: str,
        env_allow: Iterable[str] = environment.DEFAULT_ALLOW,
        records: GroupRecords | None = None,
        workdirs: WorkDirs | None = None,
    ) -> None:
        self._exec_root = exec_root
        self._base_env = dict(base_env)
        self._bash = bash
        self._env_allow = tuple(env_allow)
        self._records = records
        self._make_dir = make_dir if workdirs is None else workdirs.make

    def argv(self, script: str) -> list[str]:
        """bash's arguments for ``script``: inline with ``-c`` if it fits (see the module),
        else the name of the script file."""
        if _inline(script):
            return [self._bash, "--noprofile", "--norc", "-c", script, SCRIPT_NAME]
        return [self._bash, "--noprofile", "--norc", SCRIPT_NAME]

    async def start(self, execution: TaskExecution, output: OutputSink) -> RunningTask:
        if not isinstance(execution.kind, ShellSpec):
            raise SpawnError(f"not a shell task: {type(execution.kind).__name__}")
        script = execution.kind.script
        cwd = work_dir(self._exec_root, execution)

        def prepare() -> None:  # in the spawning thread: file system work stays off the loop
            try:
                self._make_dir(cwd)
                if not _inline(script):
                    (cwd / SCRIPT_NAME).write_text(script, encoding="utf-8")
            except OSError as exc:
                raise SpawnError(f"cannot write the script to {cwd}: {exc}") from exc

        env, notes = environment.task_environment(self._base_env, execution, self._env_allow)
        for note in notes:
            output.note(note)
        parser = OutParamParser(note=output.note)

        def on_output(data: bytes) -> None:
            output.append(data)
            parser.feed(data)

        try:
            group = await ProcessGroup.spawn(
                self.argv(script),
                cwd=cwd,
                env=env,
                on_output=on_output,
                prepare=prepare,
                records=self._records,
            )
        except OSError as exc:
            if exc.errno == errno.E2BIG:
                raise SpawnError(
                    f"the operating system refused the task's environment as too large "
                    f"({environment.size(env)} bytes in {len(env)} variables; Linux allows "
                    "128 KiB per variable and a quarter of the stack limit for all of them)"
                ) from exc
            raise SpawnError(f"cannot start {self._bash}: {exc}") from exc
        except ValueError as exc:  # e.g. a NUL byte in a variable (refused before it gets here)
            raise SpawnError(f"cannot start {self._bash}: invalid environment: {exc}") from exc
        return ShellRun(group, parser)


def _inline(script: str) -> bool:
    # Characters count at least one byte each: most scripts are decided without encoding them.
    if "\0" in script or len(script) > INLINE_MAX:
        return False
    return len(script) * 4 <= INLINE_MAX or len(script.encode("utf-8")) <= INLINE_MAX
