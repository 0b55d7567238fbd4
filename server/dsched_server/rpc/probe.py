"""Whether a server's address still has a listener: the cheap proof that a member died.

A ZooKeeper session outlives its process by up to the session timeout, and a member whose node is
gone may be dead or only cut off. One TCP connect tells the two apart when the member's host
answers: a *refused* connection means nothing listens on that port any more. dsched servers bind
without ``SO_REUSEPORT`` (:mod:`~dsched_server.rpc.serving`), so no other process shared the port,
and the incarnation that served there is gone. An accepted connection (the process may be frozen:
the kernel still accepts for it), a timeout or an unreachable host prove nothing.

A firewall that *rejects* connections (instead of dropping them) makes a cut-off member look dead;
ARCHITECTURE.md §4 states what that costs.
"""

from __future__ import annotations

import asyncio
import contextlib

PROBE_TIMEOUT_S = 2.0


def split_address(address: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` too) -> (host, port). Raises ValueError if malformed."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"not a host:port address: {address!r}")
    return host.removeprefix("[").removesuffix("]"), int(port)


async def refused(address: str, timeout: float = PROBE_TIMEOUT_S) -> bool:
    """True if ``address``'s host answers that nothing listens there; False if something accepts,
    or if the host does not answer within ``timeout`` seconds (not known)."""
    try:
        host, port = split_address(address)
        async with asyncio.timeout(timeout):
            _, writer = await asyncio.open_connection(host, port)
    except ConnectionRefusedError:
        return True
    except (OSError, TimeoutError, ValueError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return False
