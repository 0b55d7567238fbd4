"""The HTTP task's program: one request with the standard library (``urllib.request``), run by
:class:`dsched_worker.tasks.http.HttpTaskType` as a child program
(:mod:`dsched_worker.programs.runtime` has the protocol).

1. Placeholders ``${name}`` take the parameter's value: percent-encoded in the URL (every
   character but unreserved ones, so a value cannot add a path segment, a query parameter or
   change the host), as they are in header values and the body. A placeholder left in the URL (no
   such parameter) fails the attempt; in a header or the body it stays as written.
2. The URL must be allowed by the worker's list (:mod:`dsched_worker.programs.allow`), and so must
   every redirect before it is followed (redirects are not followed when a 3xx status is
   expected, so the task can check for one).
3. The log shows the request line, the headers (values of those named like Authorization, Cookie
   or *token*, *secret*, *key*, *password* as ``[redacted]``, as are such query parameters in the
   URL), the status and the first 4 KiB of the response body.
4. Success: the status is expected (default any 2xx) and the body contains ``body_contains``. A
   body over ``max_response_bytes`` fails; ``response_param`` receives the body (UTF-8, 64 KiB
   at most) as an OUT parameter.
"""

from __future__ import annotations

import re
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from http.client import HTTPMessage
from typing import IO, Any
from urllib.parse import parse_qsl, quote, urlsplit

from dsched.http_spec import (
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_REQUEST_TIMEOUT,
    PLACEHOLDER_RE,
    HttpSpec,
    http_from_json,
    success,
    url_problem,
)
from dsched_worker.programs.allow import AllowEntry, allowed, parse_entries
from dsched_worker.programs.runtime import ProgramError, log, main

LOGGED_BODY_BYTES = 4096
MAX_OUT_BYTES = 64 * 1024  # dsched.spec.MAX_PARAM_VALUE_BYTES
SENSITIVE_RE = re.compile(
    r"authorization|cookie|token|secret|key|password|passwd|credential|signature|session", re.I
)
REDACTED = "[redacted]"


def fill_url(url: str, params: Mapping[str, str]) -> str:
    """``url`` with each ``${name}`` replaced by the percent-encoded value of ``name``."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in params:
            raise ProgramError(f"the URL holds ${{{name}}} but the task has no parameter {name}")
        return quote(params[name], safe="")

    return PLACEHOLDER_RE.sub(value, url)


def fill_text(text: str, params: Mapping[str, str]) -> str:
    """``text`` with each ``${name}`` of a parameter replaced by its value; others stay."""
    return PLACEHOLDER_RE.sub(lambda m: params.get(m.group(1), m.group(0)), text)


def shown_url(url: str) -> str:
    """``url`` for the log: values of sensitive query parameters redacted."""
    parts = urlsplit(url)
    if not parts.query:
        return url
    pairs = [
        f"{k}={REDACTED}" if SENSITIVE_RE.search(k) else f"{k}={v}"
        for k, v in parse_qsl(parts.query, keep_blank_values=True)
    ]
    return parts._replace(query="&".join(pairs)).geturl()


def shown_header(name: str, value: str) -> str:
    return f"{name}: {REDACTED if SENSITIVE_RE.search(name) else value}"


class _Redirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only to an allowed URL (and not at all when ``follow`` is False)."""

    def __init__(self, entries: list[AllowEntry], follow: bool) -> None:
        self._entries = entries
        self._follow = follow

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: HTTPMessage,
        newurl: str,
    ) -> urllib.request.Request | None:
        if not self._follow:
            return None  # urllib then hands the 3xx response back as an HTTPError
        if not allowed(newurl, self._entries):
            raise ProgramError(
                f"redirect ({code}) to {shown_url(newurl)} refused: not allowed by this worker's "
                "http_allow setting"
            )
        log(f"> redirected ({code}) to {shown_url(newurl)}")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _request(spec: HttpSpec, url: str, params: Mapping[str, str]) -> urllib.request.Request:
    headers = {k: fill_text(v, params) for k, v in spec.headers.items()}
    for name, value in headers.items():
        if "\r" in value or "\n" in value or "\0" in value:
            raise ProgramError(f"header {name}: its value holds a line break after ${{...}}")
    body = fill_text(spec.body, params).encode() if spec.body else None
    request = urllib.request.Request(url, data=body, headers=headers, method=spec.method.value)
    log(f"> {spec.method.value} {shown_url(url)}")
    for name, value in headers.items():
        log("> " + shown_header(name, value))
    if body is not None:
        log(f"> ({len(body)} bytes of body)")
    return request


def _read(response: Any, limit: int) -> bytes:
    body: bytes = response.read(limit + 1)
    if len(body) > limit:
        raise ProgramError(f"the response body is larger than {limit} bytes (max_response_bytes)")
    return body


def run(spec_doc: Mapping[str, Any], params: Mapping[str, str]) -> dict[str, str]:
    spec = http_from_json(spec_doc["task"])
    entries = parse_entries(" ".join(spec_doc.get("allow", [])))
    url = fill_url(spec.url, params)
    problem = url_problem(url)
    if problem is not None:
        raise ProgramError(f"the URL {problem}")
    if not allowed(url, entries):
        raise ProgramError(
            f"{shown_url(url)} is not allowed by this worker's http_allow setting"
            + ("" if entries else " (empty: no URL is allowed)")
        )
    follow = not any(300 <= c < 400 for c in spec.expected_status)
    opener = urllib.request.build_opener(_Redirects(entries, follow))
    timeout = (spec.request_timeout or DEFAULT_REQUEST_TIMEOUT).total_seconds()
    limit = spec.max_response_bytes or DEFAULT_MAX_RESPONSE_BYTES
    request = _request(spec, url, params)
    started = time.monotonic()
    try:
        with opener.open(request, timeout=timeout) as response:
            status, reason, body = response.status, response.reason, _read(response, limit)
    except urllib.error.HTTPError as error:  # a 4xx/5xx (or unfollowed 3xx) answer is an answer
        with error:
            status, reason, body = error.code, error.reason, _read(error, limit)
    except (urllib.error.URLError, OSError) as exc:
        reason_text = getattr(exc, "reason", exc)
        raise ProgramError(f"request failed: {reason_text}") from None
    elapsed = (time.monotonic() - started) * 1000
    log(f"< {status} {reason} ({len(body)} bytes in {elapsed:.0f} ms)")
    if body:
        text = body[:LOGGED_BODY_BYTES].decode("utf-8", errors="replace")
        more = (
            f"\n< ... {len(body) - LOGGED_BODY_BYTES} more bytes"
            if len(body) > LOGGED_BODY_BYTES
            else ""
        )
        log(f"{text}{more}")
    return _outcome(spec, status, body)


def _outcome(spec: HttpSpec, status: int, body: bytes) -> dict[str, str]:
    if not success(spec, status):
        wanted = ", ".join(map(str, spec.expected_status)) or "2xx"
        raise ProgramError(f"status {status} is not an expected one ({wanted})")
    if spec.body_contains and spec.body_contains.encode() not in body:
        raise ProgramError(f"the response body does not contain {spec.body_contains!r}")
    if not spec.response_param:
        return {}
    if len(body) > MAX_OUT_BYTES:
        raise ProgramError(
            f"the response body ({len(body)} bytes) is too large for OUT parameter "
            f"{spec.response_param} (64 KiB at most)"
        )
    try:
        return {spec.response_param: body.decode("utf-8")}
    except UnicodeDecodeError:
        raise ProgramError(
            f"the response body is not UTF-8 text: OUT parameter {spec.response_param} not set"
        ) from None


if __name__ == "__main__":
    main(run)
