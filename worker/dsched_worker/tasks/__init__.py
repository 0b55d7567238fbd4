"""The task types a worker runs, looked up by the kind of a :class:`TaskExecution`.

One module per task type (``shell``, ``python``, ``spark``, ``http``). :func:`default_task_types`
is the registry the app uses; tests and future task types add entries by constructing
:class:`TaskTypes` with their own mapping.
What the task types share: :mod:`~dsched_worker.tasks.spawner` (working directory, environment,
spawn), :mod:`~dsched_worker.tasks.script` (a script inline or through a file, OUT parameters from
``setValue`` lines), :mod:`~dsched_worker.tasks.child` (dsched's own programs run as a child
process with their spec on stdin: :mod:`dsched_worker.programs`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from dsched.http_spec import HttpSpec
from dsched.python_spec import PythonSpec
from dsched.spark import SparkSpec
from dsched.spec import ShellSpec, TaskKind
from dsched.sql import ProcedureSpec, SqlSpec
from dsched_worker.process import GroupRecords
from dsched_worker.tasks.base import (
    OutputSink,
    ReportsApplications,
    RunningTask,
    SpawnError,
    TaskExit,
    TaskType,
)
from dsched_worker.tasks.child import ChildPrograms
from dsched_worker.tasks.environment import DEFAULT_ALLOW
from dsched_worker.tasks.http import HttpTaskType
from dsched_worker.tasks.python import PythonTaskType
from dsched_worker.tasks.shell import ShellTaskType
from dsched_worker.tasks.spark import SparkTaskType
from dsched_worker.tasks.spawner import Spawner
from dsched_worker.tasks.sql import ProcedureTaskType, SqlTaskType
from dsched_worker.workdirs import WorkDirs

__all__ = [
    "OutputSink",
    "ReportsApplications",
    "RunningTask",
    "SpawnError",
    "TaskExit",
    "TaskType",
    "TaskTypes",
    "default_task_types",
]


class TaskTypes:
    """Maps a kind's record class (e.g. :class:`ShellSpec`) to the task type that runs it."""

    def __init__(self, types: Mapping[type[TaskKind], TaskType]) -> None:
        self._types = dict(types)

    def for_kind(self, kind: TaskKind) -> TaskType:
        """Raises :class:`SpawnError` for a kind this worker cannot run."""
        try:
            return self._types[type(kind)]
        except KeyError:
            raise SpawnError(
                f"this worker cannot run tasks of kind {type(kind).__name__}"
            ) from None


def default_task_types(
    *,
    exec_root: Path,
    base_env: Mapping[str, str],
    bash: str,
    env_allow: Iterable[str] = DEFAULT_ALLOW,
    records: GroupRecords | None = None,
    workdirs: WorkDirs | None = None,
    spark_home: Path | None = None,
    python: str = "",
    http_allow: Iterable[str] = (),
) -> TaskTypes:
    """Every task type this worker supports, working under ``exec_root``; tasks inherit the
    variables of ``base_env`` that ``env_allow`` names; the process groups of running tasks are
    recorded in ``records``; ``workdirs`` makes their working directories; SPARK tasks submit
    with ``<spark_home>/bin/spark-submit`` (None: the installed pyspark's). ``python``: the
    default interpreter of PYTHON tasks (empty: the worker's own); ``http_allow``: the URL
    patterns HTTP tasks may request (empty: none). Raises ValueError for a bad pattern."""
    spawner = Spawner(
        exec_root=exec_root,
        base_env=base_env,
        env_allow=env_allow,
        records=records,
        workdirs=workdirs,
    )
    spark = SparkTaskType(spawner=spawner, base_env=base_env, spark_home=spark_home)
    children = ChildPrograms(spawner)
    return TaskTypes(
        {
            ShellSpec: ShellTaskType(spawner=spawner, bash=bash),
            PythonSpec: PythonTaskType(spawner=spawner, interpreter=python),
            SparkSpec: spark,
            HttpSpec: HttpTaskType(children=children, allow=tuple(http_allow)),
            SqlSpec: SqlTaskType(children),
            ProcedureSpec: ProcedureTaskType(children),
        }
    )
