"""HTTP tasks in workflows as code (:class:`Http`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Unpack

from dsched import coerce
from dsched.coerce import Seconds
from dsched.http_spec import HttpMethod, HttpSpec
from dsched.tasks import Task, TaskOptions


class Http(Task):
    """Makes one HTTP request from a worker (in a process of its own, killed and timed out like
    any task) and succeeds if the answer is what ``expected_status`` (default: any 2xx) and
    ``body_contains`` say.

    ``${name}`` in ``url``, a header value or ``body`` takes the parameter's value (percent-encoded
    in the URL). ``request_timeout``: seconds or a timedelta for the request (default 30 s; the
    task's ``timeout`` bounds the whole attempt). ``response_param``: an OUT parameter that
    receives the response body (UTF-8, at most 64 KiB); ``max_response_bytes``: a longer body
    fails the attempt (default 1 MiB). The worker only requests URLs its ``http_allow`` setting
    allows. Headers named like Authorization, Cookie or *token*/*secret*/*key* are never logged.
    Other keyword options are those of :class:`~dsched.tasks.Task`.
    """

    def __init__(
        self,
        name: str,
        url: str,
        *,
        method: HttpMethod | str = HttpMethod.GET,
        headers: Mapping[str, str] | None = None,
        body: str = "",
        request_timeout: Seconds | None = None,
        expected_status: int | Iterable[int] = (),
        body_contains: str = "",
        response_param: str = "",
        max_response_bytes: int = 0,
        **options: Unpack[TaskOptions],
    ) -> None:
        codes = (expected_status,) if isinstance(expected_status, int) else expected_status
        self.spec = HttpSpec(
            url=url,
            method=coerce.enum_value(HttpMethod, method, "method"),
            headers=dict(headers or {}),
            body=body,
            request_timeout=coerce.duration(request_timeout, "request_timeout"),
            expected_status=tuple(codes),
            body_contains=body_contains,
            response_param=response_param,
            max_response_bytes=max_response_bytes,
        )
        super().__init__(name, **options)

    def kind(self) -> HttpSpec:
        return self.spec
