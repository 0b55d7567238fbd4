"""The SPARK task type: ``spark-submit`` in a fresh working directory, in its own process group.

``spark-submit`` is ``<spark_home>/bin/spark-submit``: the worker's ``spark_home`` setting, else
the ``pyspark`` package installed next to the worker (``pip install 'dsched[spark]'``). It runs as
an argument list built by :mod:`dsched_worker.tasks.spark_submit` (parameters never pass through
a shell), never inside the worker process, with the environment every task gets
(:mod:`dsched_worker.tasks.environment`) plus ``SPARK_HOME``, the Python that runs PySpark code
(``PYSPARK_PYTHON``, ``PYSPARK_DRIVER_PYTHON``: the worker's own, which has pyspark) and the
worker's Spark client settings named in :data:`SPARK_CLIENT_ENV`.

Inline PySpark programs are written to ``main.py`` and SQL programs to ``statements.json`` in the
working directory; both run under dsched's driver (:mod:`dsched_worker.tasks.spark_driver`), which
names the application id. The output (driver and spark-submit, merged) streams to the attempt's
log, is scanned for OUT parameters and for application ids (:mod:`.spark_apps`): each new id is
handed to the runner, which reports it in a RUNNING event while the job runs.

Kill: the process group (SIGTERM, then SIGKILL after the grace: the driver of a client-mode
application is in it, and its application ends with it); a cluster-mode application, whose driver
runs on the cluster, is also killed by its id. A re-dispatch after a worker failover carries the
ids of the lost attempts' applications, and they are killed on the task's master before the new
submission (ARCHITECTURE.md §4).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

from dsched.spark import SparkProgram, SparkSpec
from dsched_server.protocol.execution import TaskExecution
from dsched_worker.process import ProcessGroup
from dsched_worker.tasks import environment
from dsched_worker.tasks.base import OutputSink, RunningTask, SpawnError, TaskExit
from dsched_worker.tasks.out_params import OutParamParser
from dsched_worker.tasks.spark_apps import ApplicationIds, run_bounded
from dsched_worker.tasks.spark_submit import driver_path, kill_argv, submit_argv
from dsched_worker.tasks.spawner import GroupRun, Launch, Spawner

PROGRAM_NAME = "main.py"
STATEMENTS_NAME = "statements.json"
# The worker's variables that configure the Spark client itself (where the cluster is, which
# address to bind); passed to spark-submit in addition to the task environment's allow-list.
SPARK_CLIENT_ENV = ("SPARK_LOCAL_IP", "SPARK_CONF_DIR", "HADOOP_CONF_DIR", "YARN_CONF_DIR")


def installed_spark_home() -> Path | None:
    """The directory of the installed ``pyspark`` package (it holds ``bin/spark-submit``)."""
    found = importlib.util.find_spec("pyspark")
    if found is None or found.origin is None:
        return None
    return Path(found.origin).parent


class SparkRun(GroupRun):
    """A running SPARK attempt: its process group, OUT parameters and application ids."""

    def __init__(
        self,
        group: ProcessGroup,
        parser: OutParamParser,
        apps: ApplicationIds,
        kill_app: Callable[[str], Awaitable[None]],
    ) -> None:
        super().__init__(group)
        self._parser = parser
        self._apps = apps
        self._kill_app = kill_app
        self._listener: Callable[[str], None] | None = None

    def watch_applications(self, listener: Callable[[str], None]) -> None:
        """Calls ``listener`` with each application id found from now on, and with the latest
        one found so far."""
        self._listener = listener
        if self._apps.latest:
            listener(self._apps.latest)

    def found(self, application_id: str) -> None:
        if self._listener is not None:
            self._listener(application_id)

    async def wait(self) -> TaskExit:
        returncode = await self._group.wait()
        self._apps.close()
        return TaskExit(
            returncode=returncode,
            out_params=self._parser.close(),
            application_id=self._apps.latest,
            ended=self._group.exited_at,
        )

    async def kill(self, grace: float) -> None:
        if self._apps.latest:
            await self._kill_app(self._apps.latest)
        await super().kill(grace)


class SparkTaskType:
    """Starts SPARK attempts with ``spawner`` and ``<spark_home>/bin/spark-submit``
    (``spark_home`` None: the installed pyspark's), with ``python`` for PySpark code (default:
    the worker's). ``base_env``: the worker's environment (its Spark client settings and, for a
    kill by id, what every task inherits)."""

    def __init__(
        self,
        *,
        spawner: Spawner,
        base_env: Mapping[str, str],
        spark_home: Path | None = None,
        python: str = sys.executable,
    ) -> None:
        self._spawner = spawner
        self._client_env = {k: v for k, v in base_env.items() if k in SPARK_CLIENT_ENV}
        self._kill_env = {**environment.inherited(base_env, environment.DEFAULT_ALLOW)}
        self._spark_home = spark_home
        self._python = python

    def _home(self) -> Path:
        home = self._spark_home or installed_spark_home()
        if home is None or not (home / "bin" / "spark-submit").is_file():
            raise SpawnError(
                "spark-submit not found: install pyspark on the worker (dsched[spark]) or set "
                "the worker's spark_home"
            )
        return home

    def _env(self, home: Path) -> dict[str, str]:
        """What spark-submit gets on top of the task's environment."""
        return {
            **self._client_env,
            "SPARK_HOME": str(home),
            "PYSPARK_PYTHON": self._python,
            "PYSPARK_DRIVER_PYTHON": self._python,
        }

    async def kill_application(self, home: Path, master: str, app: str, output: OutputSink) -> None:
        """Kills ``app`` on ``master`` by its id where a command reaches it (see
        :func:`~.spark_submit.kill_argv`), saying in the log what happened."""
        argv = kill_argv(str(home / "bin" / "spark-submit"), master, app)
        if argv is None:
            output.note(f"spark application {app} ends with its driver's process group")
            return
        output.note(f"killing spark application {app} on {master}")
        try:
            code, text = await run_bounded(argv, {**self._kill_env, **self._env(home)})
        except OSError as exc:
            output.note(f"could not kill spark application {app}: {exc}")
            return
        output.note(f"kill of {app}: exit code {code}" + (f"\n{text.strip()}" if text else ""))

    async def start(self, execution: TaskExecution, output: OutputSink) -> RunningTask:
        spec = execution.kind
        if not isinstance(spec, SparkSpec):
            raise SpawnError(f"not a spark task: {type(spec).__name__}")
        home = self._home()
        master = spec.master_url
        for earlier in execution.earlier_application_ids:
            # A lost attempt's application must not run next to this one (ARCHITECTURE.md §4).
            await self.kill_application(home, master, earlier, output)
        file, primary, app_args = _program(spec, execution, self._spawner.work_dir(execution))
        argv = submit_argv(
            str(home / "bin" / "spark-submit"),
            spec,
            primary=primary,
            params=execution.params,
            default_name=execution.task_name,
            app_args=app_args,
        )
        launch = Launch(argv=argv, program="spark-submit", file=file, env=self._env(home))
        parser = OutParamParser(note=output.note)
        run: SparkRun | None = None

        def found(app: str) -> None:
            output.note(f"spark application id {app}")
            if run is not None:
                run.found(app)

        apps = ApplicationIds(found)

        def on_output(data: bytes) -> None:
            output.append(data)
            parser.feed(data)
            apps.feed(data)

        group = await self._spawner.spawn(launch, execution, output, on_output)

        async def kill_app(app: str) -> None:
            await self.kill_application(home, master, app, output)

        run = SparkRun(group, parser, apps, kill_app)
        return run


def _program(
    spec: SparkSpec, execution: TaskExecution, cwd: Path
) -> tuple[tuple[str, str] | None, str, list[str]]:
    """The file to write first (name, text), the primary resource and the driver's arguments."""
    driver = str(driver_path())
    if spec.program_type is SparkProgram.JAR:
        return None, spec.main_file, []
    if spec.program_type is SparkProgram.SQL:
        doc = json.dumps({"statements": spec.script, "params": dict(execution.params)})
        return (STATEMENTS_NAME, doc), driver, ["sql", str(cwd / STATEMENTS_NAME)]
    if spec.main_file:
        return None, driver, ["pyspark", spec.main_file]
    return (PROGRAM_NAME, spec.script), driver, ["pyspark", str(cwd / PROGRAM_NAME)]
