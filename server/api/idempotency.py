"""Runs a mutating RPC at most once per ``request_id``.

The answer is stored in the same transaction as the change, so either both commit or neither does.
A repeated id returns the stored answer; two concurrent requests with one id race on the request
log's primary key, and the loser returns the winner's answer (also when the winner's change
makes the loser's work fail, e.g. ALREADY_EXISTS for a project created by the winner).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from google.protobuf.message import Message
from sqlalchemy.exc import IntegrityError

from dsched.errors import Aborted, DschedError
from dsched.server.api.context import MasterContext
from dsched.server.store import requests
from dsched.server.store.database import Conn

M = TypeVar("M", bound=Message)


async def once(
    ctx: MasterContext,
    request_id: str,
    method: str,
    response_type: type[M],
    work: Callable[[Conn], Awaitable[M]],
) -> M:
    """Runs ``work`` in a transaction unless ``request_id`` was seen; returns the (first) answer."""
    if request_id:
        async with ctx.db.read() as conn:
            stored = await requests.recall(conn, request_id, method)
        if stored is not None:
            return response_type.FromString(stored)
    try:
        async with ctx.db.transaction() as conn:
            response = await work(conn)
            if request_id:
                await requests.remember(
                    conn, request_id, method, response.SerializeToString(), ctx.clock.now()
                )
    except IntegrityError as exc:
        if not request_id:
            raise Aborted("a concurrent change conflicted; retry", reason="CONFLICT") from exc
        async with ctx.db.read() as conn:
            stored = await requests.recall(conn, request_id, method)
        if stored is None:
            raise Aborted("a concurrent change conflicted; retry", reason="CONFLICT") from exc
        return response_type.FromString(stored)
    except DschedError:
        # A concurrent duplicate that committed first changed what ``work`` saw (the project it
        # creates exists now, the workflow it deletes is gone): answer as that duplicate did.
        answer = await recall(ctx, request_id, method, response_type)
        if answer is None:
            raise
        return answer
    return response


async def remember_answer(
    ctx: MasterContext, request_id: str, method: str, answer: Message
) -> None:
    """Stores the answer of an RPC whose change was made elsewhere (by an instance runner)."""
    if not request_id:
        return
    try:
        async with ctx.db.transaction() as conn:
            await requests.remember(
                conn, request_id, method, answer.SerializeToString(), ctx.clock.now()
            )
    except IntegrityError:
        pass  # a concurrent duplicate stored its (equivalent) answer first


async def recall(
    ctx: MasterContext, request_id: str, method: str, response_type: type[M]
) -> M | None:
    if not request_id:
        return None
    async with ctx.db.read() as conn:
        stored = await requests.recall(conn, request_id, method)
    return response_type.FromString(stored) if stored is not None else None
