"""What every task type that runs a process shares: the attempt's working directory, its
environment, the spawn of its process group and the reasons a spawn fails.

A task type says *what* to run (an argument vector, a file to write into the working directory
first, bytes for the process's stdin) and where the output goes; :class:`Spawner` makes
``<exec_root>/<workflow_instance_id>/<task_instance_id>`` (:mod:`dsched_worker.workdirs`), builds
the environment (:mod:`dsched_worker.tasks.environment`: an allow-list of the worker's variables,
the task's parameters, dsched's identities), writes the file and starts the process in its own
group (:mod:`dsched_worker.process`), and turns the operating system's
refusals into a :class:`SpawnError` that fails the attempt with its reason while the worker
carries on.
"""

from __future__ import annotations

import errno
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from dsched_server.protocol.execution import TaskExecution
from dsched_worker.process import GroupRecords, OutputCallback, ProcessGroup
from dsched_worker.tasks import environment
from dsched_worker.tasks.base import OutputSink, SpawnError
from dsched_worker.workdirs import WorkDirs, make_dir, work_dir


@dataclass(frozen=True, slots=True, kw_only=True)
class Launch:
    """One process to start for an attempt. ``program``: how error messages name it.
    ``file``: ``(name, text)`` written into the working directory before the spawn (a script too
    large for an argument). ``stdin``: bytes the process reads on its stdin (else /dev/null).
    ``env``: variables added to the attempt's environment (after dsched's identities, so a task
    type cannot override those by accident: it names only its own)."""

    argv: list[str]
    program: str
    file: tuple[str, str] | None = None
    stdin: bytes | None = None
    env: Mapping[str, str] | None = None


class Spawner:
    """Starts attempts' processes under ``exec_root``. ``base_env`` is the worker's environment;
    tasks inherit only its variables that ``env_allow`` names. ``records``: where the process
    groups of running attempts are recorded (the worker's reaper kills them if the worker dies).
    ``workdirs``: makes the attempts' working directories (from its pool of empty ones), else
    each is made with ``mkdir``."""

    def __init__(
        self,
        *,
        exec_root: Path,
        base_env: Mapping[str, str],
        env_allow: Iterable[str] = environment.DEFAULT_ALLOW,
        records: GroupRecords | None = None,
        workdirs: WorkDirs | None = None,
    ) -> None:
        self._exec_root = exec_root
        self._inherited = environment.inherited(base_env, env_allow)
        self._records = records
        self._make_dir = make_dir if workdirs is None else workdirs.make

    def work_dir(self, execution: TaskExecution) -> Path:
        """The attempt's working directory (made by :meth:`spawn`)."""
        return work_dir(self._exec_root, execution)

    async def spawn(
        self,
        launch: Launch,
        execution: TaskExecution,
        output: OutputSink,
        on_output: OutputCallback,
    ) -> ProcessGroup:
        """Starts ``launch`` for ``execution`` with its output going to ``on_output``; notes
        about parameters left out of the environment go to ``output``. Raises
        :class:`SpawnError` if it cannot start."""
        cwd = self.work_dir(execution)
        file = launch.file

        def prepare() -> None:  # right before the spawn, so that a failure fails the spawn
            try:
                output.make()
            except OSError as exc:
                raise SpawnError(f"cannot create the task log: {exc}") from exc
            try:
                self._make_dir(cwd)
                if file is not None:
                    (cwd / file[0]).write_text(file[1], encoding="utf-8")
            except OSError as exc:
                raise SpawnError(f"cannot prepare the working directory {cwd}: {exc}") from exc

        env, notes = environment.attempt_environment(self._inherited, execution)
        if launch.env:
            env.update(launch.env)
        for note in notes:
            output.note(note)
        try:
            return await ProcessGroup.spawn(
                launch.argv,
                cwd=cwd,
                env=env,
                on_output=on_output,
                prepare=prepare,
                records=self._records,
                stdin=launch.stdin,
            )
        except OSError as exc:
            if exc.errno == errno.E2BIG:
                raise SpawnError(
                    f"the operating system refused the task's environment as too large "
                    f"({environment.size(env)} bytes in {len(env)} variables; Linux allows "
                    "128 KiB per variable and a quarter of the stack limit for all of them)"
                ) from exc
            raise SpawnError(f"cannot start {launch.program}: {exc}") from exc
        except ValueError as exc:  # e.g. a NUL byte in a variable (refused before it gets here)
            raise SpawnError(f"cannot start {launch.program}: invalid environment: {exc}") from exc


class GroupRun:
    """A started attempt that is one process group (a base: subclasses say how ``wait`` ends it)."""

    def __init__(self, group: ProcessGroup) -> None:
        self._group = group
        self.pid = group.pid
        self.started = group.started  # time.monotonic() when the process was started

    async def kill(self, grace: float) -> None:
        await self._group.kill(grace)
