"""The ``spark-submit`` command line of a SPARK attempt, as an argument list (never a shell string).

Pure. Parameters reach the application in three ways, none of which splices text into code:

- as environment variables of the driver (client mode), as for every task type;
- in the texts the proto calls *templated* (``args`` and ``conf`` values), where ``${name}`` is
  replaced by the parameter's value inside that one argument: a value holding ``; rm -rf /`` or
  ``--master yarn`` stays one argument, and spark-submit passes the arguments after the primary
  resource to the application without reading them (a ``${name}`` of no parameter stays as it is);
- SQL programs bind them as ``:name`` markers (``dsched_worker.tasks.spark_driver``).

Every value that becomes an argument of spark-submit itself was checked by
:func:`dsched.spark.spark_violations` (no leading ``-``, no comma in a comma-joined list).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from dsched.spark import DeployMode, MasterKind, SparkProgram, SparkSpec, master_kind

_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_.]*)\}")
# Standalone cluster mode: spark-submit returns once the driver is accepted unless told to wait,
# and an attempt that ended while its application runs could neither stream nor kill it.
_WAIT_CONF = {
    MasterKind.STANDALONE: "spark.standalone.submit.waitAppCompletion",
    MasterKind.YARN: "spark.yarn.submit.waitAppCompletion",
    MasterKind.KUBERNETES: "spark.kubernetes.submission.waitAppCompletion",
}


def expand(text: str, params: Mapping[str, str]) -> str:
    """``text`` with each ``${name}`` of a parameter replaced by its value (one pass: a value is
    never expanded again)."""
    return _REFERENCE.sub(lambda m: params.get(m.group(1), m.group(0)), text)


def submit_argv(
    spark_submit: str,
    spec: SparkSpec,
    *,
    primary: str,
    params: Mapping[str, str],
    default_name: str,
    app_args: Sequence[str] = (),
) -> list[str]:
    """The argument list: ``spark_submit`` (an absolute path), the options, ``primary`` (the
    file Spark runs: the user's jar or .py, or dsched's driver) and the application's arguments
    (``app_args`` first: the driver's own, then the task's, expanded)."""
    argv = [spark_submit, "--master", spec.master_url]
    if spec.deploy_mode is DeployMode.CLUSTER:
        argv += ["--deploy-mode", "cluster"]
    argv += ["--name", expand(spec.app_name, params) or default_name]
    if spec.program_type is SparkProgram.JAR:
        argv += ["--class", spec.main_class]
    for flag, count in (
        ("--driver-cores", spec.driver_cores),
        ("--executor-cores", spec.executor_cores),
        ("--num-executors", spec.num_executors),
    ):
        if count:
            argv += [flag, str(count)]
    for flag, size in (
        ("--driver-memory", spec.driver_memory),
        ("--executor-memory", spec.executor_memory),
    ):
        if size:
            argv += [flag, size]
    if spec.py_files:
        argv += ["--py-files", ",".join(spec.py_files)]
    if spec.files:
        argv += ["--files", ",".join(spec.files)]
    for key, value in _conf(spec).items():
        argv += ["--conf", f"{key}={expand(value, params)}"]
    argv.append(primary)
    argv += app_args
    argv += [expand(arg, params) for arg in spec.args]
    return argv


def _conf(spec: SparkSpec) -> dict[str, str]:
    conf = dict(spec.conf)
    kind = master_kind(spec.master_url)
    wait = _WAIT_CONF.get(kind) if kind is not None else None
    if spec.deploy_mode is DeployMode.CLUSTER and wait is not None:
        conf.setdefault(wait, "true")
    return conf


def kill_argv(spark_submit: str, master: str, application_id: str) -> list[str] | None:
    """The command that kills a cluster-mode application by its id on ``master``: a standalone
    driver (``driver-…``) or a Kubernetes submission (``namespace:pod``) with
    ``spark-submit --kill``; None for ids no such command reaches (a client-mode application
    ends with its driver's process group)."""
    kind = master_kind(master)
    if kind is MasterKind.STANDALONE and application_id.startswith("driver-"):
        return [spark_submit, "--master", master, "--kill", application_id]
    if kind is MasterKind.KUBERNETES and ":" in application_id:
        return [spark_submit, "--master", master, "--kill", application_id]
    return None


def driver_path() -> Path:
    """dsched's PySpark driver (runs inline programs and SQL, and names the application id)."""
    return Path(__file__).with_name("spark_driver.py")
