"""Datasources as plain values, and the rules a datasource must follow (README "Datasources").

Pure: the API checks every create and update with :func:`check`, and the master turns a stored
datasource into the :class:`Connection` a worker connects with (:func:`connection`).

**Connection options are an allow-list per database**, each with its own value check. A driver
option can do much more than pick a timeout: PostgreSQL's ``options=-c ...`` sets any server
setting for the session (``search_path``, ``session_preload_libraries``), MySQL's
``init_command`` runs a statement as the session starts, ``local_infile`` lets the server read the
worker's files, ``read_default_file`` reads a configuration file that can set any of those, and
``auth_plugin_map`` loads code. None of those is listed, so none can be set, and a value outside
its check is refused too. A GENERIC datasource is a SQLAlchemy URL of one of the three databases;
it is parsed here (no SQLAlchemy: the worker never imports it) and held to the same rules: its
query string is its options, its password is taken out and encrypted like any other.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from urllib.parse import parse_qsl, unquote, urlsplit

from dsched.errors import FieldViolation
from dsched.names import name_violation
from dsched.spec import MAX_DESCRIPTION_LENGTH, text_violation

MAX_HOST = 255
MAX_DATABASE = 1024  # an SQLite path may be long
MAX_USER = 128
MAX_PASSWORD = 1024
MAX_OPTIONS = 32
MAX_OPTION_VALUE = 1024
MAX_URL = 4096


class DatasourceType(StrEnum):
    """Persisted by name."""

    POSTGRESQL = "POSTGRESQL"
    MYSQL = "MYSQL"
    SQLITE = "SQLITE"
    GENERIC = "GENERIC"


class Secret:
    """A password in memory: its ``repr`` and ``str`` never show it, so a value that holds one can
    be logged or formatted into an error without leaking it. :meth:`reveal` is the one way out."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __bool__(self) -> bool:
        return bool(self._value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __repr__(self) -> str:
        return "Secret('***')" if self._value else "Secret('')"

    __str__ = __repr__


@dataclass(frozen=True, slots=True, kw_only=True)
class DatasourceSpec:
    """What a client writes (without the password, which travels and is stored on its own)."""

    name: str
    type: DatasourceType
    description: str = ""
    host: str = ""
    port: int = 0
    database: str = ""
    user: str = ""
    options: Mapping[str, str] = field(default_factory=dict)
    url: str = ""  # GENERIC only, stored without its password


@dataclass(frozen=True, slots=True, kw_only=True)
class Connection:
    """Where a worker connects: a POSTGRESQL, MYSQL or SQLITE database (a GENERIC URL resolved
    to the kind it names), with the decrypted password as a :class:`Secret`. ``error`` set:
    the master could not resolve the datasource and the attempt fails with that reason."""

    name: str
    type: DatasourceType = DatasourceType.SQLITE
    host: str = ""
    port: int = 0
    database: str = ""
    user: str = ""
    password: Secret = field(default_factory=lambda: Secret(""))
    options: Mapping[str, str] = field(default_factory=dict)
    error: str = ""


# ------------------------------------------------------------------------------ option rules

Check = Callable[[str], str | None]  # a value -> why it is refused, or None


def _one_of(*allowed: str) -> Check:
    return lambda v: None if v in allowed else "must be one of " + ", ".join(allowed)


def _int_range(low: int, high: int) -> Check:
    def check(value: str) -> str | None:
        ok = value.isascii() and value.isdigit() and low <= int(value) <= high
        return None if ok else f"must be a whole number from {low} to {high}"

    return check


def _seconds(value: str) -> str | None:
    try:
        ok = 0 <= float(value) <= 600
    except ValueError:
        ok = False
    return None if ok else "must be a number of seconds from 0 to 600"


_TEXT_RE = re.compile(r"[\x20-\x7e]{1,64}\Z")
_PATH_RE = re.compile(r"[^\x00-\x1f\x7f]{1,1024}\Z")
_BOOL = _one_of("true", "false")


def _text(value: str) -> str | None:
    return None if _TEXT_RE.match(value) else "must be 1 to 64 printable ASCII characters"


def _path(value: str) -> str | None:
    return None if _PATH_RE.match(value) else "must be a file path without control characters"


def _charset(value: str) -> str | None:
    ok = re.fullmatch(r"[A-Za-z0-9_]{1,32}", value)
    return None if ok else "must be a character set name (letters, digits, _)"


ALLOWED_OPTIONS: Mapping[DatasourceType, Mapping[str, Check]] = {
    DatasourceType.POSTGRESQL: {
        "sslmode": _one_of("disable", "allow", "prefer", "require", "verify-ca", "verify-full"),
        "connect_timeout": _int_range(1, 300),
        "application_name": _text,
        "sslrootcert": _path,
        "sslcert": _path,
        "sslkey": _path,
        "target_session_attrs": _one_of(
            "any", "read-write", "read-only", "primary", "standby", "prefer-standby"
        ),
        "keepalives": _one_of("0", "1"),
        "keepalives_idle": _int_range(1, 86400),
        "keepalives_interval": _int_range(1, 86400),
        "keepalives_count": _int_range(1, 1000),
        "gssencmode": _one_of("disable", "prefer", "require"),
    },
    DatasourceType.MYSQL: {
        "charset": _charset,
        "connect_timeout": _int_range(1, 300),
        "read_timeout": _int_range(1, 86400),
        "write_timeout": _int_range(1, 86400),
        "ssl_ca": _path,
        "ssl_cert": _path,
        "ssl_key": _path,
        "ssl_verify_cert": _BOOL,
        "ssl_verify_identity": _BOOL,
        "ssl_disabled": _BOOL,
    },
    DatasourceType.SQLITE: {
        "timeout": _seconds,
        "mode": _one_of("ro", "rw", "rwc"),
    },
}

DEFAULT_PORTS = {DatasourceType.POSTGRESQL: 5432, DatasourceType.MYSQL: 3306}

# SQLAlchemy dialect names and the drivers accepted after ``+`` in a GENERIC URL. The worker
# connects with its own driver for the dialect; the one named only has to be a real one.
_DIALECTS: Mapping[str, tuple[DatasourceType, frozenset[str]]] = {
    "postgresql": (
        DatasourceType.POSTGRESQL,
        frozenset({"psycopg", "psycopg2", "pg8000", "asyncpg", "psycopg_async"}),
    ),
    "mysql": (
        DatasourceType.MYSQL,
        frozenset(
            {"pymysql", "mysqldb", "aiomysql", "asyncmy", "mysqlconnector", "mariadbconnector"}
        ),
    ),
    "sqlite": (DatasourceType.SQLITE, frozenset({"pysqlite", "aiosqlite"})),
}
_DIALECTS = {**_DIALECTS, "mariadb": _DIALECTS["mysql"]}
_HOST_RE = re.compile(r"[A-Za-z0-9._\-]{1,255}\Z|\[?[0-9A-Fa-f:.]{2,45}\]?\Z")


def option_violations(
    path: str, kind: DatasourceType, options: Mapping[str, str]
) -> list[FieldViolation]:
    """The options of a ``kind`` datasource that the allow-list refuses."""
    rules = ALLOWED_OPTIONS.get(kind, {})
    if len(options) > MAX_OPTIONS:
        return [FieldViolation(path, f"more than {MAX_OPTIONS} options")]
    out: list[FieldViolation] = []
    for key, value in sorted(options.items()):
        where = f"{path}[{key[:64]!r}]"
        rule = rules.get(key)
        if rule is None:
            allowed = ", ".join(sorted(rules)) or "none"
            out.append(
                FieldViolation(where, f"option not allowed for {kind.value} (allowed: {allowed})")
            )
            continue
        problem = rule(value) if len(value) <= MAX_OPTION_VALUE else "is too long"
        if problem is not None:
            out.append(FieldViolation(where, problem))
    return out


# ------------------------------------------------------------------------------ GENERIC URLs


@dataclass(frozen=True, slots=True)
class ParsedUrl:
    """A GENERIC datasource's URL taken apart: the database it names, where, and its password
    (to be encrypted; :meth:`without_password` is what is stored and shown)."""

    type: DatasourceType
    host: str
    port: int
    database: str
    user: str
    password: Secret
    options: Mapping[str, str]
    scheme: str
    netloc_user: str
    rest: str

    def without_password(self) -> str:
        at = f"{self.netloc_user}@" if self.netloc_user else ""
        return f"{self.scheme}://{at}{self.rest}"


def parse_url(url: str, path: str, out: list[FieldViolation]) -> ParsedUrl | None:
    """Parses ``url`` (``dialect[+driver]://[user[:password]@]host[:port]/database[?options]``,
    SQLite ``sqlite:///relative`` or ``sqlite:////absolute``); problems go to ``out``."""
    problem = text_violation(path, url, MAX_URL)
    scheme, sep, rest = url.partition("://")
    if problem is not None or not sep:
        out.append(problem or FieldViolation(path, "must look like dialect://user@host/db"))
        return None
    dialect, _, driver = scheme.lower().partition("+")
    known = _DIALECTS.get(dialect)
    if known is None or (driver and driver not in known[1]):
        out.append(
            FieldViolation(
                path, "dialect must be postgresql, mysql, mariadb or sqlite (a known driver)"
            )
        )
        return None
    kind = known[0]
    try:
        parts = urlsplit(f"x://{rest}")
        port = parts.port or 0
    except ValueError as exc:
        out.append(FieldViolation(path, f"not a valid URL: {exc}"))
        return None
    if parts.fragment:
        out.append(FieldViolation(path, "must not have a #fragment"))
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    options = dict(pairs)
    if len(options) != len(pairs):
        out.append(FieldViolation(path, "an option is given twice"))
    out.extend(option_violations(f"{path}.options", kind, options))
    userinfo, _, _ = parts.netloc.rpartition("@")
    user_raw = userinfo.partition(":")[0]
    database = unquote(parts.path[1:])  # sqlite:////abs/path keeps its leading /
    return ParsedUrl(
        type=kind,
        host=unquote(parts.hostname or ""),
        port=port,
        database=database,
        user=unquote(user_raw),
        password=Secret(unquote(parts.password or "")),
        options=options,
        scheme=scheme,
        netloc_user=user_raw,
        rest=rest.rpartition("@")[2] if userinfo else rest,
    )


# ------------------------------------------------------------------------------ the whole


def check(
    spec: DatasourceSpec, password: str, path: str = "datasource"
) -> tuple[list[FieldViolation], ParsedUrl | None]:
    """Every violation of ``spec`` (and of its ``password``); for GENERIC also the parsed URL."""
    out: list[FieldViolation] = []
    found = [
        name_violation(f"{path}.name", spec.name, "datasource name"),
        text_violation(f"{path}.description", spec.description, MAX_DESCRIPTION_LENGTH),
    ]
    out.extend(v for v in found if v is not None)
    if len(password) > MAX_PASSWORD or "\x00" in password:
        out.append(FieldViolation(f"{path}.password", f"at most {MAX_PASSWORD} characters, no NUL"))
    if spec.type is DatasourceType.GENERIC:
        for name in ("host", "database", "user"):
            if getattr(spec, name):
                out.append(FieldViolation(f"{path}.{name}", "GENERIC takes everything from url"))
        if spec.port or spec.options:
            out.append(FieldViolation(f"{path}.options", "GENERIC takes everything from url"))
        parsed = parse_url(spec.url, f"{path}.url", out)
        if parsed is not None:
            if parsed.password and password:
                out.append(FieldViolation(f"{path}.password", "the url has a password already"))
            probe = DatasourceSpec(
                name=spec.name,
                type=parsed.type,
                host=parsed.host,
                port=parsed.port,
                database=parsed.database,
                user=parsed.user,
            )
            out.extend(_place_violations(probe, f"{path}.url"))
        return out, parsed
    if spec.url:
        out.append(FieldViolation(f"{path}.url", "only a GENERIC datasource has a url"))
    out.extend(_place_violations(spec, path))
    out.extend(option_violations(f"{path}.options", spec.type, spec.options))
    return out, None


def _place_violations(spec: DatasourceSpec, path: str) -> list[FieldViolation]:
    out: list[FieldViolation] = []
    if spec.type is DatasourceType.SQLITE:
        if not spec.database or _path(spec.database) is not None:
            out.append(FieldViolation(f"{path}.database", "the SQLite file's path is required"))
        for name in ("host", "user"):
            if getattr(spec, name):
                out.append(FieldViolation(f"{path}.{name}", "an SQLite datasource has none"))
        return out
    if not _HOST_RE.match(spec.host):
        out.append(FieldViolation(f"{path}.host", "must be a host name or an IP address"))
    if not 0 <= spec.port <= 65535:
        out.append(FieldViolation(f"{path}.port", "must be 0 to 65535 (0: the default)"))
    for name, limit in (("database", MAX_DATABASE), ("user", MAX_USER)):
        value = getattr(spec, name)
        problem = text_violation(f"{path}.{name}", value, limit)
        if problem is not None or any(c in value for c in "\r\n\t"):
            out.append(problem or FieldViolation(f"{path}.{name}", "contains control characters"))
    return out


def connection(spec: DatasourceSpec, password: Secret) -> Connection:
    """Where a worker connects for a valid ``spec`` with its decrypted ``password``."""
    if spec.type is DatasourceType.GENERIC:
        parsed = parse_url(spec.url, "url", [])
        if parsed is None:  # stored valid: only a rule made stricter since
            return Connection(name=spec.name, error=f"datasource {spec.name!r}: invalid url")
        return Connection(
            name=spec.name,
            type=parsed.type,
            host=parsed.host,
            port=parsed.port,
            database=parsed.database,
            user=parsed.user,
            password=password,
            options=dict(parsed.options),
        )
    return Connection(
        name=spec.name,
        type=spec.type,
        host=spec.host,
        port=spec.port,
        database=spec.database,
        user=spec.user,
        password=password,
        options=dict(spec.options),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class DatasourceRecord:
    """A stored datasource. ``token``: its password encrypted (None: no password), kept out of
    ``repr`` all the same."""

    spec: DatasourceSpec
    token: str | None = field(default=None, repr=False)
    create_time: datetime
    update_time: datetime

    @property
    def password_set(self) -> bool:
        return self.token is not None
