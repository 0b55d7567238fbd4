"""The HTTP task as a plain value, and its validation (``HttpTask`` in http_task.proto).

A definition's URL, header values and body may hold ``${name}`` placeholders that the worker fills
with parameter values when the attempt runs (percent-encoded in the URL). The URL is checked here
with each placeholder standing for a plain value; the worker checks the URL it finally requests
against its allow-list (``dsched_worker.programs.http``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from dsched.errors import FieldViolation
from dsched.names import param_name_problem
from dsched.text import NOT_TEXT, SURROGATE_RE, bounded_violation

MAX_URL_LENGTH = 2048
MAX_HEADERS = 64
MAX_HEADER_NAME_LENGTH = 256
MAX_HEADER_VALUE_BYTES = 8 * 1024
MAX_BODY_BYTES = 256 * 1024
MAX_EXPECTED_STATUS = 32
MAX_BODY_CONTAINS_LENGTH = 4096
DEFAULT_REQUEST_TIMEOUT = timedelta(seconds=30)
MAX_REQUEST_TIMEOUT = timedelta(hours=1)
DEFAULT_MAX_RESPONSE_BYTES = 1024 * 1024
MAX_RESPONSE_BYTES = 16 * 1024 * 1024

PLACEHOLDER_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_TOKEN_RE = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")  # RFC 9110 token: a header name
# Headers the request itself decides: framing (a forged length smuggles a second request), the
# connection, and Host (a Host header would send the request to another site of an allowed server).
CONTROLLED_HEADERS = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "te", "upgrade", "trailer"}
)


class HttpMethod(StrEnum):
    GET = "GET"
    POST = "POST"
    PUT = "PUT"
    PATCH = "PATCH"
    DELETE = "DELETE"
    HEAD = "HEAD"
    OPTIONS = "OPTIONS"


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpSpec:
    """One HTTP request and what makes it a success. Zero ``request_timeout`` and
    ``max_response_bytes`` mean their defaults (30 s, 1 MiB); empty ``expected_status`` means any
    2xx; ``response_param`` names the OUT parameter that receives the body ("" for none)."""

    url: str
    method: HttpMethod = HttpMethod.GET
    headers: Mapping[str, str] = field(default_factory=dict)
    body: str = ""
    request_timeout: timedelta = timedelta(0)
    expected_status: tuple[int, ...] = ()
    body_contains: str = ""
    response_param: str = ""
    max_response_bytes: int = 0


def http_violations(path: str, spec: HttpSpec) -> list[FieldViolation]:
    """The violations of an HTTP task at ``path`` (e.g. ``workflow.tasks[0].http``)."""
    problem = url_problem(spec.url)
    out = [] if problem is None else [FieldViolation(f"{path}.url", problem)]
    out.extend(_header_violations(f"{path}.headers", spec.headers))
    body = bounded_violation(f"{path}.body", spec.body, MAX_BODY_BYTES, "256 KiB")
    if body is not None:
        out.append(body)
    if not timedelta(0) <= spec.request_timeout <= MAX_REQUEST_TIMEOUT:
        why = f"must be between 0 and {MAX_REQUEST_TIMEOUT}"
        out.append(FieldViolation(f"{path}.request_timeout", why))
    out.extend(_status_violations(f"{path}.expected_status", spec.expected_status))
    if len(spec.body_contains) > MAX_BODY_CONTAINS_LENGTH or SURROGATE_RE.search(
        spec.body_contains
    ):
        out.append(
            FieldViolation(
                f"{path}.body_contains",
                f"must be valid text of at most {MAX_BODY_CONTAINS_LENGTH} characters",
            )
        )
    if spec.response_param:
        bad = param_name_problem(spec.response_param)
        if bad is not None:
            out.append(FieldViolation(f"{path}.response_param", bad[1], bad[0]))
    if not 0 <= spec.max_response_bytes <= MAX_RESPONSE_BYTES:
        out.append(
            FieldViolation(
                f"{path}.max_response_bytes", f"must be between 0 and {MAX_RESPONSE_BYTES}"
            )
        )
    return out


def url_problem(url: str) -> str | None:
    """Why ``url`` (placeholders standing for plain values) is not a URL a task may request."""
    if not url:
        return "is required"
    if len(url) > MAX_URL_LENGTH:
        return f"longer than {MAX_URL_LENGTH} characters"
    if not url.isascii():
        return "must be ASCII (percent-encode other characters)"
    if any(c.isspace() or not c.isprintable() for c in url):
        return "must not contain whitespace or control characters"
    if "\\" in url:
        return "must not contain a backslash"
    parts = urlsplit(PLACEHOLDER_RE.sub("x", url))
    if parts.scheme.lower() not in ("http", "https"):
        return "must be an absolute http:// or https:// URL"
    if "@" in parts.netloc:
        return "must not contain user info (user:password@); send credentials in a header"
    if not parts.hostname:
        return "has no host"
    try:
        parts.port  # noqa: B018  (raises for a port out of range or not a number)
    except ValueError:
        return "has an invalid port"
    return None


def _header_violations(path: str, headers: Mapping[str, str]) -> list[FieldViolation]:
    if len(headers) > MAX_HEADERS:
        return [FieldViolation(path, f"more than {MAX_HEADERS} headers")]
    out: list[FieldViolation] = []
    seen: set[str] = set()
    for name, value in headers.items():
        where = f"{path}[{name[:MAX_HEADER_NAME_LENGTH]!r}]"
        if len(name) > MAX_HEADER_NAME_LENGTH or not _TOKEN_RE.match(name):
            out.append(FieldViolation(where, "is not a header name (an HTTP token)"))
            continue
        if name.lower() in CONTROLLED_HEADERS:
            out.append(FieldViolation(where, "is set by the request itself"))
        elif name.lower() in seen:
            out.append(FieldViolation(where, "is given twice (header names ignore case)"))
        seen.add(name.lower())
        if "\r" in value or "\n" in value:
            out.append(FieldViolation(where, "value must not contain line breaks"))
        elif SURROGATE_RE.search(value):
            out.append(FieldViolation(where, f"value {NOT_TEXT}"))
        else:
            bad = bounded_violation(where, value, MAX_HEADER_VALUE_BYTES, "8 KiB")
            if bad is not None:
                out.append(bad)
    return out


def _status_violations(path: str, codes: tuple[int, ...]) -> list[FieldViolation]:
    if len(codes) > MAX_EXPECTED_STATUS:
        return [FieldViolation(path, f"more than {MAX_EXPECTED_STATUS} status codes")]
    out = [
        FieldViolation(f"{path}[{i}]", "must be a status code between 100 and 599")
        for i, code in enumerate(codes)
        if not 100 <= code <= 599
    ]
    if len(set(codes)) != len(codes):
        out.append(FieldViolation(path, "lists a status code twice"))
    return out


def http_to_json(spec: HttpSpec) -> dict[str, Any]:
    """The JSON shape of ``spec`` (the store's document column and the worker's request to its
    HTTP program share it); the timeout in milliseconds, the method by name."""
    return {
        "url": spec.url,
        "method": spec.method.value,
        "headers": dict(spec.headers),
        "body": spec.body,
        "request_timeout_ms": int(spec.request_timeout / timedelta(milliseconds=1)),
        "expected_status": list(spec.expected_status),
        "body_contains": spec.body_contains,
        "response_param": spec.response_param,
        "max_response_bytes": spec.max_response_bytes,
    }


def http_from_json(doc: Mapping[str, Any]) -> HttpSpec:
    """Inverts :func:`http_to_json` (missing keys take their defaults); raises KeyError,
    ValueError or TypeError for a malformed document."""
    return HttpSpec(
        url=str(doc["url"]),
        method=HttpMethod(doc.get("method", "GET")),
        headers={str(k): str(v) for k, v in dict(doc.get("headers", {})).items()},
        body=str(doc.get("body", "")),
        request_timeout=timedelta(milliseconds=int(doc.get("request_timeout_ms", 0))),
        expected_status=tuple(int(c) for c in doc.get("expected_status", ())),
        body_contains=str(doc.get("body_contains", "")),
        response_param=str(doc.get("response_param", "")),
        max_response_bytes=int(doc.get("max_response_bytes", 0)),
    )


def success(spec: HttpSpec, status: int) -> bool:
    """Whether ``status`` is a success for ``spec`` (its expected codes, else any 2xx)."""
    return status in spec.expected_status if spec.expected_status else 200 <= status < 300
