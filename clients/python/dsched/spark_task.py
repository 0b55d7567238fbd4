"""The :class:`Spark` task class: a Spark application submitted by a worker with spark-submit.

Example::

    def count(spark, dt: str) -> dict[str, object]:
        rows = spark.range(1000).filter("id % 7 = 0").count()   # imports go inside: only
        return {"rows": rows, "day": dt}                        # the def travels

    with Workflow("daily", project="demo", params={"dt": "2026-11-28"}) as wf:
        Spark.from_function(count, master="local[2]")
        Spark("count", "from pyspark.sql import SparkSession\\n...", master="local[2]")
        Spark("totals", "SELECT :dt AS dt, count(*) AS n FROM range(10)", program_type="SQL")
        Spark("etl", program_type="JAR", main_file="/jobs/etl.jar", main_class="com.acme.Etl",
              master="spark://spark-master:7077", deploy_mode="CLUSTER", args=["${dt}"])
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any, Unpack

from dsched import coerce
from dsched.function_source import FunctionSource, function_source
from dsched.python_task import function_script
from dsched.spark import DEFAULT_MASTER, DeployMode, SparkProgram, SparkSpec
from dsched.tasks import Task, TaskOptions


class Spark(Task):
    """Submits a Spark application with ``spark-submit`` on a worker (README "SPARK tasks").

    Args:
        script: PYSPARK: the program's source (or give ``main_file``); SQL: the statements,
            where ``:name`` is the parameter ``name``, bound as a value by Spark.
        program_type: PYSPARK (default), SQL or JAR.
        main_file: PYSPARK: a .py file on the worker; JAR: the application's jar.
        main_class: JAR: the main class.
        master: ``local[*]`` (default), ``local[N]``, ``spark://host:port``, ``yarn``,
            ``k8s://https://host:port``.
        deploy_mode: CLIENT (default) or CLUSTER (JVM applications on a standalone master).
        conf: ``--conf`` entries (``spark.*`` keys); ``${name}`` in a value is the parameter.
        args: the application's arguments; ``${name}`` in one is the parameter's value.

    The other Spark options are spark-submit's (``driver_memory="2g"``, ``num_executors=4``,
    ...), and the remaining keyword options those of :class:`~dsched.tasks.Task`. A line
    ``${setValue(key=value)}`` printed by the driver sets an OUT parameter.
    """

    def __init__(
        self,
        name: str,
        script: str = "",
        *,
        program_type: SparkProgram | str = SparkProgram.PYSPARK,
        main_file: str = "",
        main_class: str = "",
        master: str = DEFAULT_MASTER,
        deploy_mode: DeployMode | str = DeployMode.CLIENT,
        driver_cores: int = 0,
        driver_memory: str = "",
        executor_cores: int = 0,
        executor_memory: str = "",
        num_executors: int = 0,
        conf: Mapping[str, object] | None = None,
        py_files: Iterable[str] = (),
        files: Iterable[str] = (),
        app_name: str = "",
        args: Iterable[object] = (),
        **options: Unpack[TaskOptions],
    ) -> None:
        self.spec = SparkSpec(
            program_type=coerce.enum_value(SparkProgram, program_type, "program_type"),
            script=script,
            main_file=main_file,
            main_class=main_class,
            master=master,
            deploy_mode=coerce.enum_value(DeployMode, deploy_mode, "deploy_mode"),
            driver_cores=driver_cores,
            driver_memory=driver_memory,
            executor_cores=executor_cores,
            executor_memory=executor_memory,
            num_executors=num_executors,
            conf=coerce.params(conf),
            py_files=tuple(py_files),
            files=tuple(files),
            app_name=app_name,
            args=tuple(coerce.params({str(i): a for i, a in enumerate(args)}).values()),
        )
        super().__init__(name, **options)

    def kind(self) -> SparkSpec:
        return self.spec

    @classmethod
    def from_function(cls, fn: Callable[..., object], name: str = "", **options: Any) -> Spark:
        """A PYSPARK task whose program is ``fn`` (named after it unless ``name`` says
        otherwise); ``options`` are :class:`Spark`'s. ``fn`` ships as text, as an ``@task``
        function does (:mod:`dsched.python_task`): its parameters take the task parameters of
        the same names, a parameter ``spark`` takes the application's SparkSession (stopped when
        ``fn`` returns), and a returned dict becomes OUT parameters."""
        return cls(name or fn.__name__, pyspark_script(function_source(fn)), **options)


# Calls the shipped function with a SparkSession for its parameter ``spark``.
_SESSION = """

def @WRAPPER@(**kwargs):
    from pyspark.sql import SparkSession
    session = SparkSession.builder.getOrCreate()
    try:
        return @NAME@(spark=session, **kwargs)
    finally:
        session.stop()


@WRAPPER@.__name__ = "@NAME@"
"""


def pyspark_script(shipped: FunctionSource) -> str:
    """The PySpark program that runs ``shipped`` (see :meth:`Spark.from_function`)."""
    if "spark" not in shipped.parameters:
        return function_script(shipped)
    wrapper = f"_dsched_spark_{shipped.name}"
    session = _SESSION.replace("@WRAPPER@", wrapper).replace("@NAME@", shipped.name)
    return function_script(
        replace(
            shipped,
            name=wrapper,
            source=shipped.source + session,
            parameters=tuple(p for p in shipped.parameters if p != "spark"),
        )
    )
