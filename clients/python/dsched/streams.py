"""Resumable server streams: instance watches and log tails that survive a dropped connection.

Both streams carry a cursor (the event sequence, the byte offset) in every frame, and both requests
take one. :func:`resume` reopens a stream from the last cursor when it breaks with UNAVAILABLE (a
restarted master, a dropped connection), waiting between attempts as :class:`Reconnect` says, and
gives up with the last :class:`~dsched.errors.Unavailable` when the attempts run out. Any frame
received resets the attempts: only consecutive failures count. Other errors are raised at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol, TypeVar

import grpc

from dsched.backoff import Backoff
from dsched.errors import Unavailable
from dsched.status import error_from_rpc, status_code

R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class Reconnect(Backoff):
    """How a broken stream is reopened: ``attempts`` tries, delays growing from ``initial``.

    Delays are ``initial * multiplier**n`` capped at ``maximum``, each spread by ``±jitter`` so
    that many clients of a restarted master do not reconnect in lockstep.
    """

    attempts: int = 8
    initial: float = 0.2


class StreamCall(Protocol[R_co]):
    """What a grpc server-streaming call returns: an iterator of responses that can be cancelled."""

    def __iter__(self) -> Iterator[R_co]: ...

    def __next__(self) -> R_co: ...

    def cancel(self) -> bool: ...


def resume(
    open_call: Callable[[int, float | None], StreamCall[R]],
    cursor: int,
    cursor_of: Callable[[R], int],
    *,
    reconnect: Reconnect,
    deadline: float | None = None,
    target: str = "",
) -> Iterator[R]:
    """Yields the responses of a stream, reopening it from the last cursor after UNAVAILABLE.

    Args:
        open_call: opens the stream from a cursor with a per-call timeout (None: no deadline).
        cursor: where to start.
        cursor_of: the cursor a response reaches; the stream resumes from the greatest seen.
        reconnect: the reopening policy.
        deadline: a :func:`time.monotonic` instant after which :class:`TimeoutError` is raised.
        target: the server address, for error messages.

    Raises:
        TimeoutError: ``deadline`` passed.
        DschedError: the stream failed with anything but UNAVAILABLE, or UNAVAILABLE persisted.
    """
    delays: Iterator[float] | None = None
    while True:
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            raise TimeoutError("the deadline passed while waiting on the stream")
        call = open_call(cursor, remaining)
        try:
            for response in call:
                delays = None  # progress: only consecutive failures count
                cursor = max(cursor, cursor_of(response))
                yield response
            return
        except grpc.RpcError as err:
            code = status_code(err)
            if code is grpc.StatusCode.DEADLINE_EXCEEDED and deadline is not None:
                raise TimeoutError("the deadline passed while waiting on the stream") from None
            mapped = error_from_rpc(err, target)
            if not isinstance(mapped, Unavailable):
                raise mapped from None
            delays = delays or reconnect.delays()
            delay = next(delays, None)
            if delay is None:
                raise mapped from None
            if deadline is not None:
                delay = min(delay, max(0.0, deadline - time.monotonic()))
            time.sleep(delay)  # a back-off between reconnects, not a poll: the stream pushes
        finally:
            call.cancel()
