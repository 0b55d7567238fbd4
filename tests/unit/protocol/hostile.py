"""Hypothesis strategies for the protocol tests: valid values, and hostile messages.

A hostile message is any message of the type a peer could put on the wire: every field set (or not)
to any value its wire type allows, enum fields to numbers the proto does not define, timestamps and
durations outside their documented ranges, nested messages filled the same way.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from hypothesis import strategies as st

from dsched.http_spec import CONTROLLED_HEADERS, MAX_REQUEST_TIMEOUT, HttpMethod, HttpSpec
from dsched.names import param_name_problem
from dsched.options import TimeoutStrategy
from dsched.python_spec import PythonSpec
from dsched.spark import DeployMode, SparkProgram, SparkSpec
from dsched.spec import ShellSpec
from dsched.sql import (
    ParamDirection,
    ParamType,
    ProcedureParamSpec,
    ProcedureSpec,
    SqlSpec,
    SqlType,
)
from dsched_server.core.datasource import Connection, DatasourceType, Secret
from dsched_server.protocol.event import TaskEvent, TaskEventType
from dsched_server.protocol.execution import TaskExecution

M = TypeVar("M", bound=Message)

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
# Small numbers and the edges are where checks go wrong; the rest of the range is rarely different.
_EDGES64 = st.sampled_from([-(2**63), -1, 0, 1, 2, 2**31 - 1, 2**31, 2**63 - 1])
_RANGES = {
    FieldDescriptor.TYPE_INT32: INT32,
    FieldDescriptor.TYPE_SINT32: INT32,
    FieldDescriptor.TYPE_SFIXED32: INT32,
    FieldDescriptor.TYPE_ENUM: INT32,
    FieldDescriptor.TYPE_INT64: INT64,
    FieldDescriptor.TYPE_SINT64: INT64,
    FieldDescriptor.TYPE_SFIXED64: INT64,
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
    FieldDescriptor.TYPE_FIXED64: (0, 2**64 - 1),
}
# Hostile text: short, with the characters checks care about (controls, NUL, spaces, non-ASCII).
_TEXT = st.one_of(
    st.text(max_size=24),
    st.sampled_from(["", " ", "\x00", "a\nb", "127.0.0.1:1", "h:1 ", "é", "x" * 300]),
)


def _scalar(field: FieldDescriptor) -> st.SearchStrategy[Any]:
    if field.type == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if field.type == FieldDescriptor.TYPE_STRING:
        return _TEXT
    if field.type == FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=24)
    if field.type in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return st.floats(allow_nan=True, width=32)
    low, high = _RANGES[field.type]
    return st.one_of(st.integers(low, high), _EDGES64.filter(lambda v: low <= v <= high))


@st.composite
def _fill(draw: st.DrawFn, cls: type[M], depth: int) -> M:
    msg = cls()
    _fill_into(draw, msg, msg.DESCRIPTOR, depth)
    return msg


def _fill_into(draw: st.DrawFn, msg: Message, descriptor: Any, depth: int) -> None:
    # ``descriptor`` is a Descriptor (the upb one at run time, which the stubs type apart).
    for field in descriptor.fields:
        if not draw(st.booleans()):
            continue  # left unset
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            key_field, value_field = field.message_type.fields
            entries = draw(st.dictionaries(_scalar(key_field), _scalar(value_field), max_size=3))
            getattr(msg, field.name).update(entries)
        elif field.message_type is not None:
            count = draw(st.integers(0, 3)) if _repeated(field) else 1
            if depth <= 0:
                continue
            for _ in range(count):
                target = getattr(msg, field.name)
                child = target.add() if _repeated(field) else target
                child.SetInParent()
                _fill_into(draw, child, field.message_type, depth - 1)
        elif _repeated(field):
            getattr(msg, field.name).extend(draw(st.lists(_scalar(field), max_size=3)))
        else:
            setattr(msg, field.name, draw(_scalar(field)))


def _repeated(field: FieldDescriptor) -> bool:
    return bool(field.is_repeated)


def hostile(cls: type[M], depth: int = 3) -> st.SearchStrategy[M]:
    """Any message of type ``cls``, or the decoding of any bytes that parse as one."""
    built = _fill(cls, depth)
    parsed = st.binary(max_size=64).flatmap(lambda data: _parsed(cls, data))
    return st.one_of(built, parsed)


def _parsed(cls: type[M], data: bytes) -> st.SearchStrategy[M]:
    try:
        return st.just(cls.FromString(data))
    except Exception:  # not a message of that type: nothing to draw from these bytes
        return st.nothing()


# Valid values: what a master or a worker builds.

_IDS = st.integers(1, 2**63 - 1)
_ATTEMPTS = st.integers(1, 2**31 - 1)
_EPOCHS = st.integers(0, 2**63 - 1)
ADDRESSES = st.from_regex(r"[a-z0-9.-]{1,20}:[0-9]{1,5}", fullmatch=True)
_PARAM_NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True).filter(
    lambda n: param_name_problem(n) is None
)
_VALUES = st.text(max_size=40).filter(lambda v: "\x00" not in v)
PARAMS = st.dictionaries(_PARAM_NAMES, _VALUES, max_size=4)
TIMES = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
)


_ARGS = st.text(max_size=20).filter(lambda v: "\x00" not in v)
_PATHS = st.from_regex(r"[a-z/][a-z0-9_./]{0,20}", fullmatch=True)
_APPLICATION_IDS = st.sampled_from(
    [
        *("local-1795927222049", "app-20261129050216-0000", "driver-20261129050216-0001"),
        *("application_1795927222049_0042", "spark-jobs:etl-driver"),
    ]
)


@st.composite
def sparks(draw: st.DrawFn) -> SparkSpec:
    """Valid SPARK tasks of each program type."""
    program = draw(st.sampled_from(SparkProgram))
    master = draw(st.sampled_from(["", "local[2]", "spark://127.0.0.1:7077", "yarn"]))
    cluster = program is SparkProgram.JAR and master not in ("", "local[2]")
    return SparkSpec(
        program_type=program,
        script="" if program is SparkProgram.JAR else draw(_ARGS.filter(str.strip)),
        main_file=draw(_PATHS) if program is SparkProgram.JAR else "",
        main_class="com.acme.Main" if program is SparkProgram.JAR else "",
        master=master,
        deploy_mode=DeployMode.CLUSTER if cluster and draw(st.booleans()) else DeployMode.CLIENT,
        driver_cores=draw(st.integers(0, 8)),
        driver_memory=draw(st.sampled_from(["", "512m", "2g", "1024"])),
        num_executors=draw(st.integers(0, 8)),
        conf=draw(
            st.dictionaries(
                st.sampled_from(["spark.a", "spark.b.c"]),
                st.from_regex(r"[ -~]{0,20}", fullmatch=True),
                max_size=2,
            )
        ),
        py_files=tuple(draw(st.lists(_PATHS, max_size=2))),
        app_name=draw(st.sampled_from(["", "etl"])),
        args=tuple(draw(st.lists(_ARGS, max_size=3))),
    )


_SCRIPTS = _VALUES.filter(lambda v: v.strip() != "")
_HEADER_NAMES = _PARAM_NAMES.filter(lambda n: n.lower() not in CONTROLLED_HEADERS)
_HEADER_VALUES = _VALUES.filter(lambda v: "\r" not in v and "\n" not in v)


@st.composite
def _http(draw: st.DrawFn) -> HttpSpec:
    headers = draw(st.dictionaries(_HEADER_NAMES, _HEADER_VALUES, max_size=3))
    unique = {k.lower(): k for k in headers}  # names are unique ignoring case
    return HttpSpec(
        url=draw(
            st.sampled_from(
                ["http://h/", "https://api.example.com:8443/v1/${dt}?q=${dt}", "http://[::1]:1/x"]
            )
        ),
        method=draw(st.sampled_from(HttpMethod)),
        headers={k: headers[k] for k in unique.values()},
        body=draw(_VALUES),
        request_timeout=draw(st.timedeltas(min_value=timedelta(0), max_value=MAX_REQUEST_TIMEOUT)),
        expected_status=tuple(draw(st.lists(st.integers(100, 599), unique=True, max_size=4))),
        body_contains=draw(_VALUES),
        response_param=draw(st.one_of(st.just(""), _PARAM_NAMES)),
        max_response_bytes=draw(st.integers(0, 16 * 1024 * 1024)),
    )


_SQL_TEXTS = st.sampled_from(
    ["SELECT 1", "SELECT * FROM t WHERE a = ${dt} AND b LIKE '%${dt}%'", "DELETE FROM t;"]
)


@st.composite
def _sql(draw: st.DrawFn) -> SqlSpec:
    return SqlSpec(
        datasource=draw(st.sampled_from(["dw", "每日 db"])),
        sql=draw(_SQL_TEXTS),
        type=draw(st.sampled_from(SqlType)),
        pre_statements=tuple(draw(st.lists(_SQL_TEXTS, max_size=2))),
        allow_multiple_statements=draw(st.booleans()),
        row_limit=draw(st.integers(0, 100_000)),
    )


@st.composite
def _procedure(draw: st.DrawFn) -> ProcedureSpec:
    # Names from a fixed list: a filtered strategy drawn in lists made generation too slow for
    # hypothesis's health check on a loaded machine.
    names = draw(st.lists(st.sampled_from(["a", "b_1", "out_x", "N"]), unique=True, max_size=3))
    params = []
    for name in names:
        direction = draw(st.sampled_from(ParamDirection))
        value = "" if direction is ParamDirection.OUT else draw(st.sampled_from(["", "1", "${dt}"]))
        params.append(
            ProcedureParamSpec(
                name=name, direction=direction, type=draw(st.sampled_from(ParamType)), value=value
            )
        )
    return ProcedureSpec(
        datasource="dw",
        procedure=draw(st.sampled_from(["p", "s.p_1"])),
        params=tuple(params),
    )


@st.composite
def connections(draw: st.DrawFn) -> Connection:
    """A datasource as the master resolves it: a connection, or the reason it has none."""
    if draw(st.booleans()):
        return Connection(name="dw", error=draw(st.text(min_size=1, max_size=40)))
    kind = draw(st.sampled_from([DatasourceType.POSTGRESQL, DatasourceType.MYSQL]))
    option = "sslmode" if kind is DatasourceType.POSTGRESQL else "charset"
    value = "require" if kind is DatasourceType.POSTGRESQL else "utf8mb4"
    return Connection(
        name="dw",
        type=kind,
        host=draw(st.sampled_from(["db", "10.0.0.1"])),
        port=draw(st.integers(0, 65535)),
        database=draw(st.text(max_size=20)),
        user=draw(st.text(max_size=20)),
        password=Secret(draw(st.text(max_size=20))),
        options=draw(st.sampled_from([{}, {option: value}])),
    )


# The kinds a worker runs, valid (the wire checks them as the API does).
KINDS = st.one_of(
    st.builds(ShellSpec, script=_VALUES),
    st.builds(
        PythonSpec,
        script=_SCRIPTS,
        interpreter=st.sampled_from(["", "python3", "/usr/bin/python3"]),
    ),
    _http(),
    sparks(),
    _sql(),
    _procedure(),
)


@st.composite
def executions(draw: st.DrawFn) -> TaskExecution:
    kind = draw(KINDS)
    return TaskExecution(
        task_instance_id=draw(_IDS),
        attempt=draw(_ATTEMPTS),
        workflow_instance_id=draw(_IDS),
        workflow_code=draw(_EPOCHS),
        workflow_version=draw(st.integers(0, 2**31 - 1)),
        task_name=draw(st.from_regex(r"[A-Za-z][A-Za-z0-9 _-]{0,20}[a-z]", fullmatch=True)),
        idempotency_key=draw(st.from_regex(r"[ -~]{1,256}", fullmatch=True)),
        kind=kind,
        datasource=draw(connections()) if isinstance(kind, SqlSpec | ProcedureSpec) else None,
        earlier_application_ids=tuple(draw(st.lists(_APPLICATION_IDS, max_size=3))),
        owner_address=draw(ADDRESSES),
        owner_epoch=draw(_EPOCHS),
        submit_time=draw(TIMES),
        params=draw(PARAMS),
        timeout=draw(st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=7))),
        timeout_strategy=draw(st.sampled_from(TimeoutStrategy)),
        dry_run=draw(st.booleans()),
    )


@st.composite
def events(draw: st.DrawFn) -> TaskEvent:
    return TaskEvent(
        event_id=draw(st.text(min_size=1, max_size=64)),
        task_instance_id=draw(_IDS),
        attempt=draw(_ATTEMPTS),
        workflow_instance_id=draw(_IDS),
        type=draw(st.sampled_from(TaskEventType)),
        event_time=draw(TIMES),
        exit_code=draw(st.integers(*INT32)),
        out_params=draw(PARAMS),
        pid=draw(st.integers(0, 2**31 - 1)),
        log_path=draw(st.text(max_size=40)),
        message=draw(st.text(max_size=40)),
        application_id=draw(st.sampled_from(["", "local-1795927222049"])),
    )


ATTEMPT_KEYS = st.tuples(_IDS, _ATTEMPTS)
EPOCHS = _EPOCHS
