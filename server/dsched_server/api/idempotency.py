"""Runs a mutating RPC at most once per ``request_id``.

The answer is stored in the same transaction as the change (the application layer's
:class:`~dsched_server.app.transaction.Transaction` the call runs in), so either both commit or
neither does.
A repeated id returns the stored answer; two concurrent requests with one id race on the request
log's primary key, and the loser returns the winner's answer (also when the winner's change
makes the loser's work fail, e.g. ALREADY_EXISTS for a project created by the winner).

An id names one request, as an idempotency key does in payment APIs: the log keeps a
:func:`fingerprint` of the request it answered, and the same id with a different request (other
fields, other parameters) is FAILED_PRECONDITION with reason REQUEST_ID_REUSED instead of the first
request's answer. The same request repeated still gets the stored answer.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from typing import TypeVar

from google.protobuf.message import Message
from sqlalchemy.exc import IntegrityError

from dsched.errors import Aborted, DschedError
from dsched_server.app.context import AppContext
from dsched_server.app.transaction import Transaction, transact
from dsched_server.store import requests

M = TypeVar("M", bound=Message)


def fingerprint(request: Message) -> str:
    """SHA-256 (hex) of ``request`` without its ``request_id``, in the deterministic encoding (map
    entries sorted) and without fields this server does not know, so that a retry of the same
    request matches whatever order a client wrote its maps in."""
    canonical = type(request)()
    canonical.CopyFrom(request)
    canonical.DiscardUnknownFields()
    canonical.ClearField("request_id")
    return hashlib.sha256(canonical.SerializeToString(deterministic=True)).hexdigest()


async def once(
    ctx: AppContext,
    request: Message,
    method: str,
    response_type: type[M],
    work: Callable[[Transaction], Awaitable[M]],
) -> M:
    """Runs ``work`` (an application-layer call and the rendering of its result) in a transaction
    unless ``request``'s id was seen; returns the (first) answer.

    The id seen with another request is REQUEST_ID_REUSED (see the module docstring).
    """
    request_id: str = getattr(request, "request_id")  # noqa: B009 - every caller's has one
    key = fingerprint(request) if request_id else ""

    async def work_and_remember(tx: Transaction) -> M:
        if request_id:
            # Read in the call's own transaction, not in one before it (a transaction less per
            # call); a repeat writes nothing and commits an empty transaction.
            stored = await requests.recall(tx.conn, request_id, method, key)
            if stored is not None:
                return response_type.FromString(stored)
        response = await work(tx)
        if request_id:
            await requests.remember(
                tx.conn, request_id, method, response.SerializeToString(), tx.now, key
            )
        return response

    try:
        return await transact(ctx, work_and_remember)
    except IntegrityError as exc:
        if not request_id:
            raise Aborted("a concurrent change conflicted; retry", reason="CONFLICT") from exc
        async with ctx.db.read() as conn:
            stored = await requests.recall(conn, request_id, method, key)
        if stored is None:
            raise Aborted("a concurrent change conflicted; retry", reason="CONFLICT") from exc
        return response_type.FromString(stored)
    except DschedError:
        # A concurrent duplicate that committed first changed what ``work`` saw (the project it
        # creates exists now, the workflow it deletes is gone): answer as that duplicate did.
        answer = await recall(ctx, request, method, response_type)
        if answer is None:
            raise
        return answer


async def remember_answer(ctx: AppContext, request: Message, method: str, answer: Message) -> None:
    """Stores the answer of an RPC whose change was made elsewhere (by an instance runner)."""
    request_id: str = getattr(request, "request_id")  # noqa: B009
    if not request_id:
        return
    try:
        async with ctx.db.transaction() as conn:
            await requests.remember(
                conn,
                request_id,
                method,
                answer.SerializeToString(),
                ctx.clock.now(),
                fingerprint(request),
            )
    except IntegrityError:
        pass  # a concurrent duplicate stored its (equivalent) answer first


async def recall(
    ctx: AppContext, request: Message, method: str, response_type: type[M]
) -> M | None:
    """The stored answer to ``request``'s id, or None; REQUEST_ID_REUSED if the id answered a
    different request."""
    request_id: str = getattr(request, "request_id")  # noqa: B009
    if not request_id:
        return None
    async with ctx.db.read() as conn:
        stored = await requests.recall(conn, request_id, method, fingerprint(request))
    return response_type.FromString(stored) if stored is not None else None
