"""The SPARK task as a plain value, and its validation (README "SPARK tasks").

Pure: the SDK validates a definition with it before any RPC and the server validates every
definition and every dispatch with the same functions. What the checks protect:

- ``spark-submit`` parses its own argument list, so a value that reaches it as a separate
  argument must not be able to turn into an option: the main file may not start with ``-``, a
  list spark-submit joins with commas (``--py-files``, ``--files``) may not hold a comma, a
  ``--conf`` key is ``spark.*`` and the master and deploy mode are fields, not conf keys.
- Python applications cannot run in cluster deploy mode on a Spark standalone master (Spark
  refuses them at submission); dsched says so when the definition is written, not at 3 a.m.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from dsched.errors import FieldViolation

DEFAULT_MASTER = "local[*]"
MAX_SPARK_SCRIPT_BYTES = 256 * 1024
MAX_PATH_LENGTH = 4096
MAX_LIST_ITEMS = 64  # py_files, files
MAX_ARGS = 256
MAX_ARG_BYTES = 64 * 1024
MAX_CONF = 128
MAX_CONF_KEY_LENGTH = 256
MAX_CONF_VALUE_BYTES = 8 * 1024
MAX_APP_NAME_LENGTH = 256
MAX_CORES = 1024
MAX_EXECUTORS = 100_000
MAX_EARLIER_APPLICATIONS = 16

_LOCAL = re.compile(r"local(\[(\*|[1-9]\d{0,3})(,[1-9]\d{0,3})?\])?")
_HOST_PORT = r"[A-Za-z0-9]([A-Za-z0-9.\-]{0,252})(:[1-9]\d{0,4})"
_STANDALONE = re.compile(rf"spark://{_HOST_PORT}(,{_HOST_PORT})*")
_K8S = re.compile(r"k8s://(https?://)?[A-Za-z0-9]([A-Za-z0-9.\-]{0,252})(:[1-9]\d{0,4})?/?")
_MEMORY = re.compile(r"[1-9]\d{0,8}([kmgtp]b?)?", re.IGNORECASE)
_CONF_KEY = re.compile(r"spark\.[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+)*")
_JAVA_CLASS = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*(\.[A-Za-z_$][A-Za-z0-9_$]*)*")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
# Set through fields of their own: as conf keys they would contradict them silently.
_FIELD_KEYS = {
    "spark.master": "master",
    "spark.submit.deployMode": "deploy_mode",
    "spark.app.name": "app_name",
    "spark.driver.cores": "driver_cores",
    "spark.driver.memory": "driver_memory",
    "spark.executor.cores": "executor_cores",
    "spark.executor.memory": "executor_memory",
    "spark.executor.instances": "num_executors",
    "spark.submit.pyFiles": "py_files",
    "spark.files": "files",
}
# Application ids as Spark prints them: local mode, standalone applications and drivers, YARN,
# and a Kubernetes submission id (namespace:driver-pod).
APPLICATION_ID = re.compile(
    r"local-\d{10,16}|app-\d{14}-\d{4,}|driver-\d{14}-\d{4,}|application_\d{10,16}_\d{4,}"
    r"|[a-z0-9][a-z0-9\-]{0,62}:[a-z0-9][a-z0-9.\-]{0,252}"
)


class SparkProgram(StrEnum):
    """What a SPARK task submits. Values are the proto names without ``SPARK_PROGRAM_TYPE_``."""

    PYSPARK = "PYSPARK"
    SQL = "SQL"
    JAR = "JAR"

    @property
    def python(self) -> bool:
        """Whether Spark sees a Python application (the SQL driver is one)."""
        return self is not SparkProgram.JAR


class DeployMode(StrEnum):
    """Where the driver runs. Values are the proto names without ``SPARK_DEPLOY_MODE_``."""

    CLIENT = "CLIENT"
    CLUSTER = "CLUSTER"


class MasterKind(StrEnum):
    LOCAL = "local"
    STANDALONE = "standalone"
    YARN = "yarn"
    KUBERNETES = "k8s"


def master_kind(master: str) -> MasterKind | None:
    """The kind of cluster a master URL names, None if it is not one dsched accepts."""
    if _LOCAL.fullmatch(master):
        return MasterKind.LOCAL
    if _STANDALONE.fullmatch(master):
        return MasterKind.STANDALONE
    if master == "yarn":
        return MasterKind.YARN
    if _K8S.fullmatch(master):
        return MasterKind.KUBERNETES
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class SparkSpec:
    """A Spark application (see ``SparkTask`` in the proto for each field)."""

    program_type: SparkProgram
    script: str = ""
    main_file: str = ""
    main_class: str = ""
    master: str = DEFAULT_MASTER
    deploy_mode: DeployMode = DeployMode.CLIENT
    driver_cores: int = 0
    driver_memory: str = ""
    executor_cores: int = 0
    executor_memory: str = ""
    num_executors: int = 0
    conf: Mapping[str, str] = field(default_factory=dict)
    py_files: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    app_name: str = ""
    args: tuple[str, ...] = ()

    @property
    def master_url(self) -> str:
        """The master, with the default for an empty one."""
        return self.master or DEFAULT_MASTER


def _text(path: str, value: str, limit: int, *, lines: bool = False) -> FieldViolation | None:
    if len(value.encode("utf-8", "surrogatepass")) > limit:
        return FieldViolation(path, f"is longer than {limit} bytes")
    if _SURROGATE.search(value):
        return FieldViolation(path, "is not valid Unicode text (lone surrogate)")
    if "\x00" in value:
        return FieldViolation(path, "contains a NUL character")
    if not lines and _CONTROL.search(value):
        return FieldViolation(path, "contains control characters")
    return None


def _path(path: str, value: str) -> FieldViolation | None:
    found = _text(path, value, MAX_PATH_LENGTH)
    if found is not None:
        return found
    if not value.strip():
        return FieldViolation(path, "must not be empty")
    if value.startswith("-"):
        return FieldViolation(path, "must not start with '-' (spark-submit would read an option)")
    return None


def _paths(path: str, values: Iterable[str]) -> list[FieldViolation]:
    items = list(values)
    if len(items) > MAX_LIST_ITEMS:
        return [FieldViolation(path, f"more than {MAX_LIST_ITEMS} entries")]
    out = []
    for i, value in enumerate(items):
        found = _path(f"{path}[{i}]", value)
        if found is None and "," in value:
            found = FieldViolation(
                f"{path}[{i}]", "must not contain ',' (spark-submit splits on it)"
            )
        if found is not None:
            out.append(found)
    return out


def _count(path: str, value: int, limit: int) -> FieldViolation | None:
    if not 0 <= value <= limit:
        return FieldViolation(path, f"must be between 0 and {limit}")
    return None


def _memory(path: str, value: str) -> FieldViolation | None:
    if value and not _MEMORY.fullmatch(value):
        return FieldViolation(path, "must be a size such as 512m, 2g or 4096 (MiB)")
    return None


def _program_violations(path: str, spec: SparkSpec) -> list[FieldViolation | None]:
    found: list[FieldViolation | None] = []
    script = _text(f"{path}.script", spec.script, MAX_SPARK_SCRIPT_BYTES, lines=True)
    found.append(script)
    if spec.program_type is SparkProgram.PYSPARK:
        if bool(spec.script.strip()) == bool(spec.main_file):
            found.append(FieldViolation(f"{path}.script", "give either script or main_file"))
        elif spec.main_file:
            found.append(_path(f"{path}.main_file", spec.main_file))
    elif spec.program_type is SparkProgram.SQL:
        if not spec.script.strip():
            found.append(FieldViolation(f"{path}.script", "the SQL statements are required"))
        if spec.main_file:
            found.append(FieldViolation(f"{path}.main_file", "is not used by SQL programs"))
    else:
        found.append(_path(f"{path}.main_file", spec.main_file))
        if not _JAVA_CLASS.fullmatch(spec.main_class) or len(spec.main_class) > 1024:
            found.append(FieldViolation(f"{path}.main_class", "must be a Java class name"))
        if spec.script:
            found.append(FieldViolation(f"{path}.script", "is not used by JAR programs"))
    if spec.program_type is not SparkProgram.JAR and spec.main_class:
        found.append(FieldViolation(f"{path}.main_class", "is used by JAR programs only"))
    return found


def _master_violations(path: str, spec: SparkSpec) -> list[FieldViolation | None]:
    kind = master_kind(spec.master_url)
    if kind is None:
        return [
            FieldViolation(
                f"{path}.master",
                "must be local, local[N], local[*], spark://host:port, yarn or k8s://host:port",
            )
        ]
    if spec.deploy_mode is not DeployMode.CLUSTER:
        return []
    if kind is MasterKind.LOCAL:
        return [FieldViolation(f"{path}.deploy_mode", "cluster mode needs a cluster master")]
    if kind is MasterKind.STANDALONE and spec.program_type.python:
        return [
            FieldViolation(
                f"{path}.deploy_mode",
                "a Spark standalone master runs Python applications (PYSPARK, SQL) in client "
                "mode only",
            )
        ]
    return []


def _conf_violations(path: str, conf: Mapping[str, str]) -> list[FieldViolation | None]:
    if len(conf) > MAX_CONF:
        return [FieldViolation(path, f"more than {MAX_CONF} entries")]
    found: list[FieldViolation | None] = []
    for key, value in conf.items():
        where = f"{path}[{key!r}]"
        if len(key) > MAX_CONF_KEY_LENGTH or not _CONF_KEY.fullmatch(key):
            found.append(FieldViolation(where, "keys are spark.* names (letters, digits, _ - .)"))
        elif key in _FIELD_KEYS:
            found.append(FieldViolation(where, f"set it with the field {_FIELD_KEYS[key]}"))
        found.append(_text(where, value, MAX_CONF_VALUE_BYTES))
    return found


def spark_violations(path: str, spec: SparkSpec) -> list[FieldViolation]:
    """Every problem of ``spec``; field paths under ``path`` (e.g. ``workflow.tasks[0].spark``)."""
    found = _program_violations(path, spec)
    found += _master_violations(path, spec)
    found += [
        _count(f"{path}.driver_cores", spec.driver_cores, MAX_CORES),
        _count(f"{path}.executor_cores", spec.executor_cores, MAX_CORES),
        _count(f"{path}.num_executors", spec.num_executors, MAX_EXECUTORS),
        _memory(f"{path}.driver_memory", spec.driver_memory),
        _memory(f"{path}.executor_memory", spec.executor_memory),
        _text(f"{path}.app_name", spec.app_name, MAX_APP_NAME_LENGTH),
    ]
    found += _conf_violations(f"{path}.conf", spec.conf)
    if len(spec.args) > MAX_ARGS:
        found.append(FieldViolation(f"{path}.args", f"more than {MAX_ARGS} arguments"))
    else:
        found += [
            _text(f"{path}.args[{i}]", a, MAX_ARG_BYTES, lines=True)
            for i, a in enumerate(spec.args)
        ]
    out = [v for v in found if v is not None]
    out += _paths(f"{path}.py_files", spec.py_files)
    out += _paths(f"{path}.files", spec.files)
    return out


def application_ids_violations(path: str, ids: Iterable[str]) -> list[FieldViolation]:
    """Checks application ids a master hands a worker to kill (at most 16, each Spark's form)."""
    items = list(ids)
    if len(items) > MAX_EARLIER_APPLICATIONS:
        return [FieldViolation(path, f"more than {MAX_EARLIER_APPLICATIONS} ids")]
    return [
        FieldViolation(f"{path}[{i}]", "is not a Spark application id")
        for i, value in enumerate(items)
        if not APPLICATION_ID.fullmatch(value)
    ]
