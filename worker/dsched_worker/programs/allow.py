"""The worker's allow-list of URLs for HTTP tasks (its ``http_allow`` setting,
``DSCHED_HTTP_ALLOW``): which URLs a task may request, redirects included.

An entry is ``scheme://host[:port][/path-prefix]``:

- **scheme**: ``http`` or ``https``, compared without regard to case.
- **host**: a name compared without regard to case, exactly (``api.example.com``; a trailing dot or
  another spelling does not match), or ``*.example.com`` for any name *under* example.com (not
  example.com itself); or an IP address in its usual form (IPv6 in brackets: ``[::1]``), compared
  as an address, so ``[0:0::1]`` is ``[::1]``. Names are not resolved: the entry trusts whatever
  the name resolves to.
- **port**: the URL's port, or the scheme's default (80, 443) when the URL has none, must equal the
  entry's port, or the scheme's default if the entry has none; ``:*`` allows any port.
- **path prefix**: the URL's path, percent-decoded and with ``.`` and ``..`` segments resolved,
  must be the prefix or lie under it on a ``/`` boundary (``/api`` allows ``/api`` and
  ``/api/v1``, not ``/apix``, and not ``/api/../admin`` or ``/api/%2e%2e/admin``).

A URL with user info (``http://allowed@evil/`` is a request to ``evil``), a backslash, whitespace
or a non-ASCII character matches nothing. The empty list allows nothing: a worker makes no HTTP
request until its operator says where it may go.
"""

from __future__ import annotations

import ipaddress
import posixpath
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}
ANY_PORT = -1


@dataclass(frozen=True, slots=True)
class AllowEntry:
    """One parsed entry (see the module)."""

    scheme: str
    host: str  # lower case; "*.suffix" for a wildcard; an IP address in its compressed form
    port: int  # ANY_PORT for ":*"
    path: str  # "" for any path; else normalised, without a trailing "/"

    def allows(self, url: ParsedUrl) -> bool:
        if url.scheme != self.scheme:
            return False
        if self.port != ANY_PORT and url.port != self.port:
            return False
        if self.host.startswith("*."):
            if not url.host.endswith(self.host[1:]) or _is_ip(url.host):
                return False
        elif url.host != self.host:
            return False
        return not self.path or url.path == self.path or url.path.startswith(self.path + "/")


@dataclass(frozen=True, slots=True)
class ParsedUrl:
    """A URL as the allow-list compares it: lower-case scheme and host (an IP address in its
    compressed form), the effective port, and the normalised path."""

    scheme: str
    host: str
    port: int
    path: str


def parse_entries(text: str) -> list[AllowEntry]:
    """The entries of a comma- or space-separated list; raises ValueError naming a bad one."""
    return [parse_entry(e) for e in text.replace(",", " ").split()]


def parse_entry(entry: str) -> AllowEntry:
    """One entry; raises ValueError if it is not ``scheme://host[:port][/path-prefix]``."""
    any_port = ":*" in entry
    probe = entry.replace(":*", "", 1) if any_port else entry
    url = parse_url(probe)
    parts = urlsplit(probe)
    if url is None or parts.query or parts.fragment or "*" in probe.replace("//*.", "//", 1):
        raise ValueError(f"{entry!r} is not scheme://host[:port][/path-prefix] (http or https)")
    host = url.host
    if parts.hostname and parts.hostname.startswith("*."):
        host = parts.hostname.lower()
    path = url.path.rstrip("/") if parts.path not in ("", "/") else ""
    return AllowEntry(url.scheme, host, ANY_PORT if any_port else url.port, path)


def parse_url(url: str) -> ParsedUrl | None:
    """``url`` as the allow-list compares it, or None if it matches no entry whatever the list
    (see the module)."""
    if not url.isascii() or "\\" in url or any(c.isspace() or not c.isprintable() for c in url):
        return None
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or "@" in parts.netloc or not parts.hostname:
        return None
    host = parts.hostname.lower()
    if _is_ip(host):
        host = ipaddress.ip_address(host).compressed
    elif parts.netloc.startswith("["):
        return None  # brackets around something that is not an IPv6 address
    return ParsedUrl(
        scheme, host, DEFAULT_PORTS[scheme] if port is None else port, _path(parts.path)
    )


def _path(raw: str) -> str:
    # Decode first (a server may decode %2e%2e and %2f before resolving), then resolve dot
    # segments; posixpath.normpath keeps a leading "//" as POSIX requires, which no path needs.
    decoded = unquote(raw or "/")
    normal = posixpath.normpath("/" + decoded.lstrip("/"))
    return "/" if normal == "/" else normal.rstrip("/")


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def allowed(url: str, entries: list[AllowEntry]) -> bool:
    """Whether some entry allows ``url``."""
    parsed = parse_url(url)
    return parsed is not None and any(e.allows(parsed) for e in entries)
