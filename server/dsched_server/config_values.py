"""Single setting values: how a string or TOML value becomes a checked, normalised setting.

Every function here raises ValueError with a message fit for a user; :mod:`dsched_server.config`
turns it into a field violation naming where the value came from. Only what the checks need lives
here: which settings exist and where they are read is the business of the config module.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Literal, get_args
from urllib.parse import urlsplit

from dsched.names import MAX_WORKER_GROUP_LENGTH, PARAM_NAME_RE, WORKER_GROUP_RE
from dsched.python_spec import interpreter_violation
from dsched_worker.programs.allow import parse_entry

HostSelector = Literal["lower_weight", "round_robin", "random"]
HOST_SELECTORS: tuple[HostSelector, ...] = get_args(HostSelector)
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
EMBEDDED_REGISTRY = "embedded"
# A standalone's registry served over gRPC (``RegistryService``), as its worker process reaches it:
# ``grpc://host:port``.
REGISTRY_SERVICE_SCHEME = "grpc://"
WorkerMode = Literal["process", "in-process"]
WORKER_MODES: tuple[WorkerMode, ...] = get_args(WorkerMode)

# Plain and async URL schemes we accept -> the async driver the store uses.
_DB_SCHEMES = {
    "sqlite": "sqlite+aiosqlite",
    "sqlite+aiosqlite": "sqlite+aiosqlite",
    "postgres": "postgresql+asyncpg",
    "postgresql": "postgresql+asyncpg",
    "postgresql+asyncpg": "postgresql+asyncpg",
    "mysql": "mysql+aiomysql",
    "mysql+aiomysql": "mysql+aiomysql",
    "mariadb": "mysql+aiomysql",
    "mariadb+aiomysql": "mysql+aiomysql",
}


def normalize_db_url(url: str) -> str:
    """Returns ``url`` with the async driver of its database; raises ValueError if unsupported."""
    scheme, sep, rest = url.partition("://")
    target = _DB_SCHEMES.get(scheme.lower())
    if not sep or target is None:
        known = "sqlite, postgresql, mysql, mariadb"
        raise ValueError(f"unsupported database URL scheme {scheme!r} (use {known})")
    if target.startswith("sqlite"):
        if rest and not rest.startswith("/"):
            raise ValueError("a SQLite URL looks like sqlite:///path/to/file.db")
    else:
        try:
            parts = urlsplit(f"x://{rest}")
            _ = parts.port  # parsing the port is what validates it
        except ValueError as exc:
            raise ValueError(f"malformed database URL: {exc}") from None
        if not parts.hostname:
            raise ValueError("a database URL needs a host, as in postgresql://user@host/db")
    return f"{target}://{rest}"


def parse_registry(value: str) -> tuple[str, str]:
    """Splits a ZooKeeper connect string ``host[:port],...[/chroot]`` into the hosts and the chroot
    ("" for none); raises ValueError if it is malformed."""
    hosts, slash, chroot = value.partition("/")
    for entry in hosts.split(","):
        host, colon, port = entry.partition(":")
        bad_host = not host or any(c.isspace() or c == "@" for c in host)
        if bad_host or (colon and not _is_port(port, 1)):
            raise ValueError(f"{entry!r} is not host[:port] of a ZooKeeper server")
    if slash and chroot and not all(chroot.split("/")):
        raise ValueError(f"chroot /{chroot} has an empty segment")
    return hosts, f"/{chroot}" if chroot else ""


def _is_port(text: str, lowest: int = 0) -> bool:
    return text.isdigit() and lowest <= int(text) <= 65535


_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})
_KIND_NAMES: dict[type, str] = {
    bool: "true or false",
    int: "an integer",
    float: "a number",
    str: "a string",
    Path: "a path",
}


def convert(
    kind: type, value: object, *, text: bool, base: Path | None, environ: Mapping[str, str]
) -> object:
    """``value`` as ``kind`` (bool, int, float, str or Path).

    ``text`` values (environment, flags) are parsed from their string; the others (TOML, defaults)
    must already have the right type, so ``port = "80"`` in a file is an error. A relative path is
    relative to ``base`` (the config file's directory) or else the working directory; a leading
    ``~`` is ``environ``'s HOME.
    """
    if text and isinstance(value, str):
        value = _parse(kind, value)
    if kind is float and type(value) is int:
        value = float(value)
    if type(value) is not (str if kind is Path else kind):
        raise ValueError(f"must be {_KIND_NAMES[kind]}, not {type(value).__name__} {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("must be a finite number")
    if kind is Path:
        return _path(str(value), base, environ)
    return value.strip() if isinstance(value, str) else value


def _parse(kind: type, text: str) -> object:
    word = text.strip()
    if kind is bool:
        if word.lower() in _TRUE | _FALSE:
            return word.lower() in _TRUE
    elif kind is int or kind is float:
        with contextlib.suppress(ValueError):
            return kind(word)
    else:
        return text
    raise ValueError(f"must be {_KIND_NAMES[kind]}, not {text!r}")


def _path(text: str, base: Path | None, environ: Mapping[str, str]) -> Path:
    if not text.strip():
        raise ValueError("must not be empty")
    if text == "~" or text.startswith("~/"):
        # Expanded with the given environment's HOME, not the process's, so the loader stays pure.
        home = environ.get("HOME") or str(Path.home())
        text = home + text[1:]
    path = Path(text)
    return path if path.is_absolute() else (base or Path.cwd()) / path


def _in_range(low: float, high: float, *, open_low: bool = False) -> Callable[[object], object]:
    def check(value: object) -> object:
        assert isinstance(value, int | float)
        if value < low or value > high or (open_low and value == low):
            bound = "above" if open_low else "at least"
            upper = "" if high == math.inf else f" and at most {high:g}"
            raise ValueError(f"must be {bound} {low:g}{upper}, not {value:g}")
        return value

    return check


def _choice(options: Sequence[str], fold: Callable[[str], str]) -> Callable[[object], object]:
    def check(value: object) -> object:
        folded = fold(str(value))
        if folded not in options:
            raise ValueError(f"must be one of {', '.join(options)}, not {value!r}")
        return folded

    return check


def _check_host(value: object) -> object:
    text = str(value)
    if not text or len(text) > 253 or any(c.isspace() or c in "/@," for c in text):
        raise ValueError(f"{text!r} is not a host name or IP address")
    return text


def _check_cluster_host(value: object) -> object:
    return value if value == "" else _check_host(value)


def _check_group(value: object) -> object:
    text = str(value)
    if len(text) > MAX_WORKER_GROUP_LENGTH or not WORKER_GROUP_RE.match(text):
        raise ValueError(
            f"worker group {text!r} must be 1-{MAX_WORKER_GROUP_LENGTH} letters, digits, '.', '_' "
            "or '-', starting with a letter or digit"
        )
    return text


def _check_env_allow(value: object) -> object:
    # Names a worker's tasks inherit from its environment besides the defaults: "SPARK_HOME,
    # HADOOP_CONF_DIR, KRB5*". The operator's choice, so reserved names are fine; DSCHED_* names
    # are not (the worker's own settings, which may hold secrets).
    entries = [e.strip() for e in str(value).replace(",", " ").split()]
    for entry in entries:
        if not PARAM_NAME_RE.match(entry.removesuffix("*")) or entry.upper().startswith("DSCHED_"):
            raise ValueError(
                f"{entry!r} is not an environment variable name or a PREFIX*, outside DSCHED_*"
            )
    return ",".join(entries)


def _check_interpreter(value: object) -> object:
    # The default interpreter of PYTHON tasks: what a task may name itself (python_spec).
    problem = interpreter_violation("python_interpreter", str(value)) if value else None
    if problem is not None:
        raise ValueError(problem.description)
    return str(value)


def _check_http_allow(value: object) -> object:
    # URL patterns HTTP tasks may request: parsed as the worker's HTTP program parses them, so a
    # bad entry stops the server at start instead of failing every HTTP task.
    entries = [e.strip() for e in str(value).replace(",", " ").split()]
    for entry in entries:
        parse_entry(entry)  # ValueError names the entry
    return ",".join(entries)


def _check_db_url(value: object) -> object:
    return normalize_db_url(str(value))


def _check_registry_auth(value: object) -> object:
    # The value is a secret: messages describe it but never repeat it.
    text = str(value)
    user, colon, password = text.partition(":")
    if text and not (colon and user and password):
        raise ValueError("must be user:password (digest credentials), both parts non-empty")
    if any(c.isspace() or not c.isprintable() for c in user):
        raise ValueError("the user of user:password must not contain spaces or control characters")
    return text


def _check_registry(value: object) -> object:
    text = str(value)
    if text.startswith(REGISTRY_SERVICE_SCHEME):
        host, colon, port = text.removeprefix(REGISTRY_SERVICE_SCHEME).rpartition(":")
        if not (host and colon and _is_port(port, 1)):
            raise ValueError(f"{text!r} is not {REGISTRY_SERVICE_SCHEME}host:port")
    elif text != EMBEDDED_REGISTRY:
        parse_registry(text)
    return text


def check(name: str, value: object) -> object:
    """``value`` of the setting ``name`` checked and normalised (settings without rules pass)."""
    rule = _CHECKS.get(name)
    return value if rule is None else rule(value)


_CHECKS: dict[str, Callable[[object], object]] = {
    "host": _check_host,
    "port": _in_range(0, 65535),
    "worker_port": _in_range(0, 65535),
    "cluster_host": _check_cluster_host,
    "cluster_port": _in_range(0, 65535),
    "master_capacity": _in_range(1, 10_000_000),
    "db_url": _check_db_url,
    "registry": _check_registry,
    "registry_session_timeout": _in_range(2, 60),
    "registry_auth": _check_registry_auth,
    "worker_group": _check_group,
    "worker_slots": _in_range(1, math.inf),
    "heartbeat_interval": _in_range(0, 3600, open_low=True),
    "failover_delay": _in_range(0, 86400),
    "instance_sweep_interval": _in_range(0, 3600, open_low=True),
    "dispatch_timeout": _in_range(0, 7 * 86400),
    "min_schedule_interval": _in_range(0, 86400),
    "host_selector": _choice(HOST_SELECTORS, lambda s: s.lower().replace("-", "_")),
    "worker_mode": _choice(WORKER_MODES, lambda s: s.lower().replace("_", "-")),
    "warmup_seconds": _in_range(0, 86400),
    "shutdown_timeout": _in_range(1, 3600),
    "log_level": _choice(LOG_LEVELS, str.upper),
    "cpu_threshold": _in_range(0, 1, open_low=True),
    "memory_threshold": _in_range(0, 1, open_low=True),
    "disk_threshold": _in_range(0, 1, open_low=True),
    "task_env_allow": _check_env_allow,
    "python_interpreter": _check_interpreter,
    "http_allow": _check_http_allow,
    "workdir_keep_failed": _in_range(0, 365 * 86400),
    "log_retention_days": _in_range(0, 36500),
    "request_id_retention_days": _in_range(0, 36500),
    "event_retention_days": _in_range(0, 36500),
    "instance_retention_days": _in_range(0, 36500),
    "retention_interval": _in_range(1, 86400),
}
