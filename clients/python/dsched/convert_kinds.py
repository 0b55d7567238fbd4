"""The PYTHON and HTTP task kinds to and from their messages. Both ``TaskDefinition.kind`` (a
definition) and ``TaskExecution.kind`` (a dispatch) carry them under the same field names
(``python`` = 22, ``http`` = 26), so one pair of functions serves the definition seam
(:mod:`dsched.convert`) and the master-worker wire (``dsched_server.protocol.wire``).

Decoding never raises (see :mod:`dsched.convert`): an unknown method or a malformed duration is a
violation and the field's default; the rest is checked by
:func:`dsched.python_spec.python_violations` and :func:`dsched.http_spec.http_violations`.
"""

from __future__ import annotations

from typing import Protocol

from dsched.errors import FieldViolation
from dsched.http_spec import HttpMethod, HttpSpec
from dsched.proto_fields import EnumMap, duration, option
from dsched.python_spec import PythonSpec
from dsched.v1 import http_task_pb2, python_task_pb2

HTTP_METHOD = EnumMap(HttpMethod, http_task_pb2.HttpMethod, "HTTP_METHOD_")
KINDS = ("python", "http")  # the oneof fields this module handles


class KindHolder(Protocol):
    """A message with the ``kind`` oneof (``TaskDefinition`` or ``TaskExecution``)."""

    @property
    def python(self) -> python_task_pb2.PythonTask: ...

    @property
    def http(self) -> http_task_pb2.HttpTask: ...


def python_to_proto(spec: PythonSpec) -> python_task_pb2.PythonTask:
    return python_task_pb2.PythonTask(script=spec.script, interpreter=spec.interpreter)


def http_to_proto(spec: HttpSpec) -> http_task_pb2.HttpTask:
    msg = http_task_pb2.HttpTask(
        method=HTTP_METHOD.name(spec.method),
        url=spec.url,
        headers=dict(spec.headers),
        body=spec.body,
        expected_status=list(spec.expected_status),
        body_contains=spec.body_contains,
        response_param=spec.response_param,
        max_response_bytes=spec.max_response_bytes,
    )
    if spec.request_timeout:
        msg.request_timeout.FromTimedelta(spec.request_timeout)
    return msg


def kind_into(msg: KindHolder, kind: object) -> bool:
    """Sets ``msg``'s kind to ``kind`` if it is one of this module's; returns whether it was."""
    if isinstance(kind, PythonSpec):
        msg.python.CopyFrom(python_to_proto(kind))
    elif isinstance(kind, HttpSpec):
        msg.http.CopyFrom(http_to_proto(kind))
    else:
        return False
    return True


def kind_from(
    msg: KindHolder, which: str | None, path: str, out: list[FieldViolation]
) -> PythonSpec | HttpSpec | None:
    """The kind of ``msg`` whose set oneof field is ``which``, if it is one of :data:`KINDS`."""
    if which == "python":
        return PythonSpec(script=msg.python.script, interpreter=msg.python.interpreter)
    if which == "http":
        return http_from_proto(msg.http, f"{path}.http", out)
    return None


def http_from_proto(msg: http_task_pb2.HttpTask, path: str, out: list[FieldViolation]) -> HttpSpec:
    return HttpSpec(
        url=msg.url,
        method=option(HTTP_METHOD, HttpMethod, msg.method, HttpMethod.GET, f"{path}.method", out),
        headers=dict(msg.headers),
        body=msg.body,
        request_timeout=duration(msg, "request_timeout", f"{path}.request_timeout", out),
        expected_status=tuple(msg.expected_status),
        body_contains=msg.body_contains,
        response_param=msg.response_param,
        max_response_bytes=msg.max_response_bytes,
    )
