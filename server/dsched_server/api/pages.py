"""One page of a List RPC, bounded by count (``page_size``) and by bytes (:data:`PAGE_BYTES`).

Every answer must fit a client with gRPC's default settings, which refuses messages over 4 MiB
(4,194,304 bytes). A page takes items while their encoded size stays within :data:`PAGE_BYTES`,
and always at least one, so the proof needs only the largest possible single item:

* ``Workflow`` (ListWorkflows, and GetWorkflow and the other answers that carry one): its tasks,
  parameters and descriptions are at most ``MAX_DEFINITION_BYTES`` = 2 MiB encoded, checked before
  it is stored; the server adds ``code``, ``version``, ``release_state`` and two timestamps, under
  64 bytes. At most 2,097,216 bytes.
* ``WorkflowInstance``: start parameters <= ``MAX_PARAMS_BYTES`` (256 KiB) of names and values in at
  most ``MAX_PARAMS`` (256) entries, var pool <= 256 KiB in at most ``MAX_VAR_POOL_PARAMS`` (1,024)
  entries, each map entry adding at most 10 bytes of framing; start tasks <= ``MAX_TASKS`` (2,000)
  names of at most 256 bytes plus 3 bytes of framing; names, worker group, host and state reason
  (<= 1,024 characters, 4 KiB) under 8 KiB; the rest under 200 bytes. At most
  262,144 + 2,560 + 262,144 + 10,240 + 518,000 + 8,192 + 200 = 1,063,480 bytes.
* ``TaskInstance``: OUT parameters <= 256 KiB in at most 256 entries, the rest under 8 KiB:
  at most 262,144 + 2,560 + 8,192 = 272,896 bytes.
* ``Project``, ``WorkflowVersion``: names and descriptions, under 5 KiB.

So a page holds at most ``PAGE_BYTES`` + one item's framing per item (<= 5 bytes, 1,000 items) if
its items are small, or one item of at most 2,097,216 bytes otherwise, plus ``next_page_token``
(<= 600 bytes): at most 3,145,728 + 5,000 + 600 = 3,151,328 bytes < 4,194,304.
``tests/integration/api/test_answer_sizes.py`` builds the largest items and checks it.

The other answers that grow are bounded without pages: a WatchWorkflowInstance frame holds at most
500 events of at most 1,024 characters of message (under 4.4 KiB each, 2.2 MiB); a log read or
tail chunk is at most 1 MiB; ListClusterMembers holds one entry of about 200 bytes per live
member (4 MiB would take some 20,000 members); any one-item answer carries at most the items above.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, TypeVar

from google.protobuf.message import Message

from dsched_server.store import paging
from dsched_server.store.database import Conn, Database
from dsched_server.store.paging import Cursor

PAGE_BYTES = 3 * 1024 * 1024
# Rows read per query while filling a page: a page of large items stops after a few of them, so
# the store is not asked for a thousand megabyte-sized rows at once.
FETCH_CHUNK = 32
# A repeated field's item costs its tag (1 byte) and length (<= 4 bytes) besides its own bytes.
ITEM_FRAMING = 5

R = TypeVar("R")
K = TypeVar("K", int, str)
M = TypeVar("M", bound=Message)

Fetch = Callable[[K | None, int], Awaitable[Sequence[R]]]


class PageRequest(Protocol):
    """The paging fields every List request has."""

    page_size: int
    page_token: str


async def collect(
    cursor: Cursor[K],
    fetch: Fetch[K, R],
    key: Callable[[R], K],
    render: Callable[[R], Awaitable[M]],
) -> tuple[list[M], str]:
    """Fills one page: ``fetch(after, n)`` returns up to ``n`` rows after the key ``after`` in the
    listing's order, ``render`` makes a row the item to send and ``key`` gives a row's sort key.
    Returns the items and the next page's token ("" after the last item)."""
    items: list[M] = []
    used = 0
    after = cursor.after
    while True:
        wanted = min(cursor.limit - len(items), FETCH_CHUNK) + 1  # one more: is there a next?
        rows = await fetch(after, wanted)
        for row in rows:
            if len(items) == cursor.limit:
                return items, cursor.token(key_of(after))
            item = await render(row)
            size = item.ByteSize() + ITEM_FRAMING
            if items and used + size > PAGE_BYTES:
                return items, cursor.token(key_of(after))
            items.append(item)
            used += size
            after = key(row)
        if len(rows) < wanted:
            return items, ""


async def page_by_name(
    db: Database,
    listing: str,
    request: PageRequest,
    fetch: Callable[[Conn, str | None, int], Awaitable[Sequence[R]]],
    name: Callable[[R], str],
    render: Callable[[R], M],
) -> tuple[list[M], str]:
    """One page of a listing of every row of one kind in the order of its unique name, with no
    filter (the projects, the datasources): ``fetch(conn, after, n)`` reads up to ``n`` rows
    after the name ``after``, ``name`` gives a row's name and ``render`` makes it the item to
    send. Returns what :func:`collect` does."""
    cursor = paging.cursor(listing, {}, paging.NAME_KEY, request.page_size, request.page_token)
    async with db.read() as conn:
        return await collect(cursor, lambda after, n: fetch(conn, after, n), name, sync(render))


def sync(render: Callable[[R], M]) -> Callable[[R], Awaitable[M]]:
    """A plain conversion as :func:`collect`'s ``render``."""

    async def run(row: R) -> M:
        return render(row)

    return run


def key_of(after: K | None) -> K:
    """The key of the last item taken (there is one whenever a page stops early)."""
    assert after is not None
    return after
