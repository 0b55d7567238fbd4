"""The worker's URL allow-list (:mod:`dsched_worker.programs.allow`) against hostile URLs, and the
HTTP program's handling of parameters and secrets (:mod:`dsched_worker.programs.http`)."""

from __future__ import annotations

import pytest

from dsched_worker.programs.allow import allowed, parse_entries, parse_entry
from dsched_worker.programs.http import fill_text, fill_url, shown_header, shown_url
from dsched_worker.programs.runtime import ProgramError

ENTRIES = parse_entries(
    "http://127.0.0.1:8080/api, https://*.example.com, http://[::1]:*, HTTPS://Reports.Example.org"
)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/api",
        "http://127.0.0.1:8080/api/",
        "http://127.0.0.1:8080/api/v1/x?y=1#frag",
        "HTTP://127.0.0.1:8080/api/x",  # the scheme ignores case
        "http://127.0.0.1:8080/api/a/../b",  # stays under /api once resolved
        "https://a.example.com/anything",
        "https://a.b.EXAMPLE.com:443/",
        "http://[::1]:9/",
        "http://[0:0:0:0:0:0:0:1]:9/",  # the same address
        "https://reports.example.org/",
    ],
)
def test_allowed(url: str) -> None:
    assert allowed(url, ENTRIES)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080@evil.com/api",  # user info: the host is evil.com
        "http://127.0.0.1:8080/api@evil.com/",
        "http://user:pw@127.0.0.1:8080/api",
        "http://127.0.0.1:8080/apix",  # a prefix only on a segment boundary
        "http://127.0.0.1:8080/api/../admin",
        "http://127.0.0.1:8080/api/%2e%2e/admin",
        "http://127.0.0.1:8080/api/..%2fadmin",
        "http://127.0.0.1:8080/API",  # paths are case-sensitive
        "http://127.0.0.1:8081/api",  # another port
        "http://127.0.0.1/api",  # the default port is not 8080
        "https://127.0.0.1:8080/api",  # another scheme
        "http://127.1:8080/api",  # another spelling of the address is another host
        "http://2130706433:8080/api",
        "http://localhost:8080/api",
        "https://example.com/",  # the wildcard is for names under it
        "https://evilexample.com/",
        "https://a.example.com.evil.com/",
        "https://a.example.com:8443/",
        "https://evil.com#.example.com",
        "https://evil.com?x=.example.com",
        "https://evil.com\\.example.com",
        "http://[::2]:9/",
        "http://[::1/",
        "ftp://a.example.com/",
        "https://a.example.com /",
        "https://ä.example.com/",
        "https://a.example.com./",
        "",
        "//a.example.com/",
    ],
)
def test_refused(url: str) -> None:
    assert not allowed(url, ENTRIES)


def test_an_empty_list_allows_nothing() -> None:
    assert not allowed("http://127.0.0.1/", parse_entries(""))


@pytest.mark.parametrize(
    "entry",
    [
        "127.0.0.1",
        "ftp://x",
        "http://",
        "http://a@b",
        "http://x/?q=1",
        "http://*",
        "http://a.*.com",
    ],
)
def test_bad_entries_are_refused(entry: str) -> None:
    with pytest.raises(ValueError, match="is not scheme://host"):
        parse_entry(entry)


def test_parameters_are_percent_encoded_in_the_url_only() -> None:
    params = {"day": "2024/05 06&x=1", "host": "evil.com/", "at": "a@b"}
    url = fill_url("http://h:1/api/${day}?d=${day}&h=${host}&a=${at}", params)
    assert (
        url
        == "http://h:1/api/2024%2F05%2006%26x%3D1?d=2024%2F05%2006%26x%3D1&h=evil.com%2F&a=a%40b"
    )
    assert fill_text("day ${day}, kept ${other}", params) == "day 2024/05 06&x=1, kept ${other}"


def test_a_url_placeholder_without_a_parameter_fails() -> None:
    with pytest.raises(ProgramError, match=r"no parameter missing"):
        fill_url("http://h/${missing}", {})


def test_secrets_are_redacted_in_the_log() -> None:
    assert shown_url("http://h/p?a=1&api_key=k&Token=t&b=2") == (
        "http://h/p?a=1&api_key=[redacted]&Token=[redacted]&b=2"
    )
    for name in (
        "Authorization",
        "Cookie",
        "X-Auth-Token",
        "X-Client-Secret",
        "Proxy-Authorization",
    ):
        assert shown_header(name, "v") == f"{name}: [redacted]"
    assert shown_header("Accept", "text/plain") == "Accept: text/plain"
