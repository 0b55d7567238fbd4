"""The shell task type: ``bash script.sh`` in a fresh working directory, in its own process group.

The script is written verbatim to
``<exec_root>/<workflow_instance_id>/<task_instance_id>/script.sh`` and run with that directory as
its working directory. Parameters are never spliced into the script text: they reach it as
environment variables (the worker's own environment without its ``DSCHED_*`` settings, then every
resolved parameter as it is, then the task's ``DSCHED_*`` variables below, which therefore cannot
be overridden), and ``${name}`` expands with bash's own quoting rules.

Output (stdout and stderr merged) goes to the attempt's log as it arrives and is scanned for
``setValue`` markers (:mod:`dsched.worker.tasks.out_params`). Process-group handling, including the
clean-up of children left behind by the script, is in :mod:`dsched.worker.process`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from dsched.spec import ShellSpec
from dsched.worker.execution import TaskExecution
from dsched.worker.process import ProcessGroup
from dsched.worker.tasks.base import OutputSink, RunningTask, SpawnError, TaskExit
from dsched.worker.tasks.out_params import OutParamParser

SCRIPT_NAME = "script.sh"


def work_dir(exec_root: Path, execution: TaskExecution) -> Path:
    """The attempt's working directory (numbers only: no client text reaches the path)."""
    return exec_root / str(execution.workflow_instance_id) / str(execution.task_instance_id)


def task_environment(base: Mapping[str, str], execution: TaskExecution) -> dict[str, str]:
    """The environment of the attempt's process (see the module docstring for the order). The
    worker's own ``DSCHED_*`` settings (a database URL may hold a password) are not inherited."""
    env = {k: v for k, v in base.items() if not k.upper().startswith("DSCHED_")}
    env.update(execution.params)
    env.update(
        {
            "DSCHED_IDEMPOTENCY_KEY": execution.idempotency_key,
            "DSCHED_TASK_INSTANCE_ID": str(execution.task_instance_id),
            "DSCHED_WORKFLOW_INSTANCE_ID": str(execution.workflow_instance_id),
            "DSCHED_TASK_NAME": execution.task_name,
            "DSCHED_ATTEMPT": str(execution.attempt),
            # Fencing for effects outside dsched's database (reliability notes §4.10): a sink that
            # remembers the highest token per key can refuse a stale incarnation's late write.
            "DSCHED_WORKER_ADDRESS": execution.worker_address,
            "DSCHED_WORKER_EPOCH": str(execution.worker_epoch),
            "DSCHED_FENCING_TOKEN": f"{execution.worker_epoch}:{execution.attempt}",
        }
    )
    return env


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
    the worker's own PATH, so a task's PATH parameter cannot change which bash runs)."""

    def __init__(self, *, exec_root: Path, base_env: Mapping[str, str], bash: str) -> None:
        self._exec_root = exec_root
        self._base_env = dict(base_env)
        self._bash = bash

    async def start(self, execution: TaskExecution, output: OutputSink) -> RunningTask:
        if not isinstance(execution.kind, ShellSpec):
            raise SpawnError(f"not a shell task: {type(execution.kind).__name__}")
        cwd = work_dir(self._exec_root, execution)
        try:
            cwd.mkdir(parents=True, exist_ok=True)
            (cwd / SCRIPT_NAME).write_text(execution.kind.script, encoding="utf-8")
        except OSError as exc:
            raise SpawnError(f"cannot write the script to {cwd}: {exc}") from exc
        parser = OutParamParser()

        def on_output(data: bytes) -> None:
            output.append(data)
            parser.feed(data)

        try:
            group = await ProcessGroup.spawn(
                [self._bash, SCRIPT_NAME],
                cwd=cwd,
                env=task_environment(self._base_env, execution),
                on_output=on_output,
            )
        except (OSError, ValueError) as exc:  # ValueError: e.g. an environment the OS refuses
            raise SpawnError(f"cannot start {self._bash}: {exc}") from exc
        return ShellRun(group, parser)
