"""Settings: one frozen object, parsed once at start. Nothing else in dsched reads ``os.environ``.

Sources, lowest to highest precedence::

    defaults  <  TOML file (--config FILE or DSCHED_CONFIG)  <  DSCHED_* environment  <  flags

One name per setting: the :class:`Settings` field, the TOML key and the environment variable
(``DSCHED_`` + the name in capitals) are the same, e.g. ``worker_slots`` and
``DSCHED_WORKER_SLOTS``. A TOML file may hold one table per role (``[standalone]``, ``[master]``,
``[worker]``) whose keys override the top level for that role, so one file can serve a master and a
worker on the same host::

    data_dir = "/var/lib/dsched"          # a relative path in a file is relative to the file
    registry = "zk1:2181,zk2:2181/dsched"
    db_url = "postgresql://dsched@db/dsched"
    [worker]
    port = 1234

Every problem is reported at once, in one :class:`~dsched.errors.InvalidArgument` whose field
violations name where each bad value came from: ``--port``, ``DSCHED_PORT``,
``/etc/dsched.toml:[worker].port``, or ``argv`` for an unknown flag.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NoReturn, TextIO, get_args

from dsched.errors import FieldViolation, InvalidArgument
from dsched_server.config_values import (
    EMBEDDED_REGISTRY,
    HOST_SELECTORS,
    LOG_LEVELS,
    REGISTRY_SERVICE_SCHEME,
    HostSelector,
    WorkerMode,
    check,
    convert,
    normalize_db_url,
    parse_registry,
)
from dsched_server.constants import (
    DEFAULT_CLUSTER_PORT,
    DEFAULT_MASTER_CAPACITY,
    DEFAULT_MASTER_PORT,
    DEFAULT_WORKER_GROUP,
    DEFAULT_WORKER_PORT,
    EVENT_RETENTION_DAYS,
    FAILOVER_DELAY_S,
    HEARTBEAT_INTERVAL_S,
    INSTANCE_RETENTION_DAYS,
    LOG_RETENTION_DAYS,
    REGISTRY_SESSION_TIMEOUT_S,
    REQUEST_ID_RETENTION_DAYS,
    RETENTION_INTERVAL_S,
    WORKDIR_KEEP_FAILED_S,
)
from dsched_server.heartbeat import Thresholds
from dsched_server.shutdown import DEFAULT_SHUTDOWN_TIMEOUT_S

__all__ = [
    "EMBEDDED_REGISTRY",
    "HOST_SELECTORS",
    "LOG_LEVELS",
    "ROLES",
    "HostSelector",
    "Role",
    "Settings",
    "build_arg_parser",
    "configure_logging",
    "load_settings",
    "normalize_db_url",
]

Role = Literal["standalone", "master", "worker"]
ROLES: tuple[Role, ...] = get_args(Role)
DEFAULT_ZOOKEEPER = "127.0.0.1:2181/dsched"
ENV_PREFIX = "DSCHED_"


def default_worker_slots() -> int:
    """Four task slots per CPU, at least four: most tasks wait on other systems."""
    return max(4, 4 * (os.cpu_count() or 1))


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """Everything a dsched server is configured with. :func:`load_settings` builds and validates it;
    constructing it directly (tests) trusts the caller.

    A master serves clients on ``host:port`` and workers on ``cluster_host:cluster_port`` (the
    cluster listener; an empty ``cluster_host`` means ``host``). An empty ``db_url`` means the
    SQLite file ``<data_dir>/dsched.db``. ``db_url`` and
    ``registry_auth`` are kept out of ``repr`` because they may hold a password: log
    :attr:`safe_db_url` instead. ``registry_session_timeout`` is the ZooKeeper session timeout in
    seconds: how long a server may be out of touch before its members vanish and others take over.
    ``shutdown_timeout`` bounds a stop (SIGTERM) in seconds: what is not done by then is abandoned
    (see :mod:`dsched_server.lifecycle`).
    ``failover_delay`` is how much longer masters wait before re-running the tasks of a worker whose
    death they cannot confirm (a master's instances are taken over at once).
    """

    role: Role = "standalone"
    data_dir: Path
    host: str = "127.0.0.1"
    port: int = DEFAULT_MASTER_PORT
    worker_port: int = 0
    worker_mode: WorkerMode = "process"
    cluster_host: str = ""
    cluster_port: int = DEFAULT_CLUSTER_PORT
    master_capacity: int = DEFAULT_MASTER_CAPACITY
    db_url: str = field(default="", repr=False)
    registry: str = EMBEDDED_REGISTRY
    registry_session_timeout: float = REGISTRY_SESSION_TIMEOUT_S
    registry_auth: str = field(default="", repr=False)
    worker_group: str = DEFAULT_WORKER_GROUP
    worker_slots: int = field(default_factory=default_worker_slots)
    heartbeat_interval: float = HEARTBEAT_INTERVAL_S
    failover_delay: float = FAILOVER_DELAY_S
    instance_sweep_interval: float = 15.0
    dispatch_timeout: float = 0.0
    min_schedule_interval: float = 1.0
    host_selector: HostSelector = "lower_weight"
    warmup_seconds: float = 600.0
    outbox_fsync: bool = False
    shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT_S
    log_level: str = "INFO"
    cpu_threshold: float = 0.9
    memory_threshold: float = 0.9
    disk_threshold: float = 0.9
    task_env_allow: str = ""
    spark_home: str = ""  # SPARK tasks' spark-submit: <spark_home>/bin; empty: pyspark's own
    python_interpreter: str = ""
    http_allow: str = ""
    workdir_keep_failed: float = WORKDIR_KEEP_FAILED_S
    log_retention_days: float = LOG_RETENTION_DAYS
    request_id_retention_days: float = REQUEST_ID_RETENTION_DAYS
    event_retention_days: float = EVENT_RETENTION_DAYS
    instance_retention_days: float = INSTANCE_RETENTION_DAYS
    retention_interval: float = RETENTION_INTERVAL_S
    # The key file of datasource passwords; None: <data_dir>/datasource.key (README "Datasources").
    datasource_key_file: Path | None = None

    def __post_init__(self) -> None:
        if not self.db_url:
            # The one derived default; filled in here, once, and frozen from then on.
            object.__setattr__(self, "db_url", f"sqlite+aiosqlite:///{self.data_dir / 'dsched.db'}")

    @property
    def thresholds(self) -> Thresholds:
        """The usages above which this server reports BUSY."""
        return Thresholds(
            cpu=self.cpu_threshold, memory=self.memory_threshold, disk=self.disk_threshold
        )

    @property
    def task_env_allow_list(self) -> tuple[str, ...]:
        """``task_env_allow`` as entries: the worker's variables tasks inherit besides the
        defaults (a trailing ``*`` makes an entry a prefix)."""
        return tuple(self.task_env_allow.split(",")) if self.task_env_allow else ()

    @property
    def http_allow_list(self) -> tuple[str, ...]:
        """``http_allow`` as entries: the URL patterns HTTP tasks may request (none if empty)."""
        return tuple(self.http_allow.split(",")) if self.http_allow else ()

    @property
    def address(self) -> str:
        """``host:port`` as other servers and clients dial this server."""
        return f"{self.host}:{self.port}"

    @property
    def embedded_registry(self) -> bool:
        """True when the registry lives inside this process (standalone)."""
        return self.registry == EMBEDDED_REGISTRY

    @property
    def registry_service(self) -> str | None:
        """``host:port`` of a standalone's ``RegistryService`` when the registry is one
        (``grpc://host:port``: the worker process of a standalone), else None."""
        if self.registry.startswith(REGISTRY_SERVICE_SCHEME):
            return self.registry.removeprefix(REGISTRY_SERVICE_SCHEME)
        return None

    @property
    def zookeeper(self) -> tuple[str, str]:
        """``(hosts, chroot)`` of a ZooKeeper registry, e.g. ``("zk1:2181,zk2:2181", "/dsched")``;
        the chroot is "" when there is none. Raises ValueError for the embedded registry and a
        registry service."""
        if self.embedded_registry or self.registry_service is not None:
            raise ValueError("the embedded registry has no ZooKeeper hosts")
        return parse_registry(self.registry)

    @property
    def registry_credentials(self) -> tuple[str, str] | None:
        """``(user, password)`` of ``registry_auth`` for ZooKeeper's digest ACLs, or None."""
        if not self.registry_auth:
            return None
        user, _, password = self.registry_auth.partition(":")
        return user, password

    @property
    def safe_db_url(self) -> str:
        """``db_url`` with its password, if any, replaced by ``***``."""
        scheme, sep, rest = self.db_url.partition("://")
        creds, at, location = rest.rpartition("@")
        if not at or ":" not in creds:
            return self.db_url
        return f"{scheme}{sep}{creds.split(':', 1)[0]}:***@{location}"


@dataclass(frozen=True, slots=True)
class _Option:
    """One setting: its type, flag (if any) and the roles whose command line offers that flag."""

    name: str
    kind: type
    flag: str | None = None
    roles: tuple[Role, ...] = ROLES
    help: str = ""


_MASTERS: tuple[Role, ...] = ("standalone", "master")
_OPTIONS = (
    _Option("data_dir", Path, "--data-dir", help="data directory (default ~/.dsched)"),
    _Option("host", str, "--host", help="address to bind and advertise (default 127.0.0.1)"),
    _Option("port", int, "--port", help="gRPC port (0: any free port)"),
    _Option("worker_port", int, "--worker-port", ("standalone",), "embedded worker's port"),
    _Option(
        "worker_mode",
        str,
        "--worker",
        ("standalone",),
        'where the worker runs: "process" (a child process) or "in-process"',
    ),
    _Option(
        "cluster_host",
        str,
        "--cluster-host",
        _MASTERS,
        "address of the listener for workers (default: --host; standalone: 127.0.0.1)",
    ),
    _Option(
        "cluster_port", int, "--cluster-port", _MASTERS, "port of the listener for workers (0: any)"
    ),
    _Option("master_capacity", int, "--capacity", _MASTERS, "instances driven before BUSY"),
    _Option("db_url", str, "--db", ("standalone", "master"), "database URL (default SQLite)"),
    _Option(
        "registry",
        str,
        "--registry",
        help='"embedded", ZooKeeper hosts[/chroot], or grpc://host:port (a standalone\'s)',
    ),
    _Option("registry_session_timeout", float),
    # A secret: file or environment only, never a flag (command lines are visible to every user).
    _Option("registry_auth", str),
    _Option("worker_group", str, "--group", ("standalone", "worker"), "worker group"),
    _Option("worker_slots", int, "--slots", ("standalone", "worker"), "concurrent tasks"),
    _Option("heartbeat_interval", float),
    _Option("failover_delay", float),
    _Option("instance_sweep_interval", float),
    _Option("dispatch_timeout", float),
    _Option("min_schedule_interval", float),
    _Option("host_selector", str),
    _Option("warmup_seconds", float),
    _Option("outbox_fsync", bool),
    _Option("shutdown_timeout", float, "--shutdown-timeout", help="seconds a stop may take"),
    _Option("log_level", str, "--log-level", help="DEBUG, INFO, WARNING, ERROR or CRITICAL"),
    _Option("cpu_threshold", float),
    _Option("memory_threshold", float),
    _Option("disk_threshold", float),
    _Option("task_env_allow", str),
    _Option("spark_home", str),
    _Option("python_interpreter", str),
    _Option("http_allow", str),
    _Option("workdir_keep_failed", float),
    _Option("log_retention_days", float),
    _Option("request_id_retention_days", float),
    _Option("event_retention_days", float),
    _Option("instance_retention_days", float),
    _Option("retention_interval", float),
    _Option(
        "datasource_key_file",
        Path,
        "--datasource-key-file",
        _MASTERS,
        "key file of datasource passwords (default <data-dir>/datasource.key)",
    ),
)
_BY_NAME = {o.name: o for o in _OPTIONS}


@dataclass(frozen=True, slots=True)
class _Raw:
    """A value as found (a string from argv/environment, a TOML value) and where it was found."""

    value: object
    source: str
    text: bool = False  # a string to parse (environment, flags), not a typed TOML value
    base: Path | None = None  # the directory that relative paths are relative to


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # Bad flags are bad settings: report them like every other one, without exiting.
        raise InvalidArgument("invalid settings", violations=[FieldViolation("argv", message)])


def build_arg_parser(role: Role, *, add_help: bool = True) -> argparse.ArgumentParser:
    """The flags of ``role`` (all strings, None when absent). Errors raise InvalidArgument."""
    parser = _Parser(prog=f"dsched {role}", add_help=add_help)
    parser.add_argument("--config", metavar="FILE", help="TOML settings file (env DSCHED_CONFIG)")
    for opt in _OPTIONS:
        if opt.flag is not None and role in opt.roles:
            env = ENV_PREFIX + opt.name.upper()
            help_text = f"{opt.help} [{env}]"
            metavar = opt.flag.removeprefix("--").upper().replace("-", "_")
            parser.add_argument(opt.flag, dest=opt.name, metavar=metavar, help=help_text)
    return parser


def load_settings(argv: Sequence[str], environ: Mapping[str, str], *, role: Role) -> Settings:
    """Parses ``argv`` (flags only) over ``environ`` over the config file over ``role``'s defaults.

    Raises :class:`~dsched.errors.InvalidArgument` naming every bad value; ``--help`` prints the
    usage and exits (SystemExit), as argparse does.
    """
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}")
    namespace = build_arg_parser(role).parse_args(list(argv))
    violations: list[FieldViolation] = []
    raw = _defaults(role)
    config, config_source = namespace.config, "--config"
    if not config:
        config, config_source = environ.get(ENV_PREFIX + "CONFIG"), ENV_PREFIX + "CONFIG"
    if config:
        raw.update(_read_file(Path(config), config_source, role, violations))
    for opt in _OPTIONS:
        env = ENV_PREFIX + opt.name.upper()
        if env in environ:
            raw[opt.name] = _Raw(environ[env], env, text=True)
    for opt in _OPTIONS:
        if getattr(namespace, opt.name, None) is not None:
            raw[opt.name] = _Raw(getattr(namespace, opt.name), opt.flag or opt.name, text=True)
    values: dict[str, Any] = {}
    for name, found in raw.items():
        try:
            kind = _BY_NAME[name].kind
            value = convert(kind, found.value, text=found.text, base=found.base, environ=environ)
            values[name] = check(name, value)
        except ValueError as exc:
            violations.append(FieldViolation(found.source, str(exc)))
    violations += _cross_checks(role, values, raw)
    if violations:
        raise InvalidArgument("invalid settings", violations=violations)
    return Settings(role=role, **values)


def _defaults(role: Role) -> dict[str, _Raw]:
    """Role-dependent defaults, as raw values so that they pass the same checks as the others."""
    port = DEFAULT_WORKER_PORT if role == "worker" else DEFAULT_MASTER_PORT
    registry = EMBEDDED_REGISTRY if role == "standalone" else DEFAULT_ZOOKEEPER
    defaults = {
        "data_dir": _Raw("~/.dsched", "default"),
        "port": _Raw(port, "default"),
        "registry": _Raw(registry, "default"),
    }
    if role == "standalone":
        # Its only worker is on this machine: the cluster listener stays on loopback, any free port.
        defaults["cluster_host"] = _Raw("127.0.0.1", "default")
        defaults["cluster_port"] = _Raw(0, "default")
    return defaults


def _read_file(
    path: Path, source: str, role: Role, violations: list[FieldViolation]
) -> dict[str, _Raw]:
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
    except OSError as exc:
        violations.append(FieldViolation(source, f"cannot read {path}: {exc.strerror}"))
        return {}
    except tomllib.TOMLDecodeError as exc:
        violations.append(FieldViolation(source, f"{path} is not valid TOML: {exc}"))
        return {}
    found: dict[str, _Raw] = {}
    tables: list[tuple[str, Mapping[str, object], bool]] = [("", data, True)]
    for name in ROLES:
        if isinstance(data.get(name), dict):
            tables.append((f"[{name}].", data[name], name == role))
        elif name in data:
            violations.append(FieldViolation(f"{path}:{name}", "must be a table of settings"))
    for prefix, table, applies in tables:
        for key, value in table.items():
            where = f"{path}:{prefix}{key}"
            if key in _BY_NAME:
                if applies:
                    found[key] = _Raw(value, where, base=path.absolute().parent)
            elif not (prefix == "" and key in ROLES):
                violations.append(FieldViolation(where, "unknown setting"))
    return found


def _cross_checks(
    role: Role, values: Mapping[str, Any], raw: Mapping[str, _Raw]
) -> list[FieldViolation]:
    out: list[FieldViolation] = []
    if role != "standalone" and values.get("registry") == EMBEDDED_REGISTRY:
        out.append(
            FieldViolation(
                raw["registry"].source,
                "the embedded registry lives inside one process: use `dsched standalone`, or a "
                "ZooKeeper connect string such as 127.0.0.1:2181/dsched",
            )
        )
    port, worker_port = values.get("port"), values.get("worker_port")
    if role == "standalone" and port and port == worker_port:
        out.append(FieldViolation(raw["worker_port"].source, f"must differ from port {port}"))
    cluster_port = values.get("cluster_port", DEFAULT_CLUSTER_PORT)
    if role != "worker" and cluster_port and cluster_port in (port, worker_port):
        where = raw["cluster_port"].source if "cluster_port" in raw else "default cluster_port"
        out.append(FieldViolation(where, f"must differ from the other ports ({cluster_port})"))
    return out


class _Handler(logging.StreamHandler[TextIO]):
    """The handler dsched installs, marked so that configuring twice replaces it."""


def configure_logging(settings: Settings, stream: TextIO | None = None) -> None:
    """Sends records at ``settings.log_level`` and above to ``stream`` (stderr), with the role in
    each line. Calling it again replaces the previous configuration instead of doubling lines."""
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _Handler)]:
        root.removeHandler(old)
    handler = _Handler(stream or sys.stderr)
    handler.setFormatter(
        logging.Formatter(f"%(asctime)s %(levelname)-7s {settings.role} %(name)s: %(message)s")
    )
    root.addHandler(handler)
    root.setLevel(settings.log_level)
    # kazoo logs every reconnect attempt at INFO; our state listener already reports what matters.
    logging.getLogger("kazoo").setLevel(
        logging.DEBUG if settings.log_level == "DEBUG" else logging.WARNING
    )
