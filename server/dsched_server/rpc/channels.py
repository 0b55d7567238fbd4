"""Cached client channels to other servers (workers, other masters), one per address.

A channel is created on first use with the common :data:`CHANNEL_OPTIONS` and kept for the next
call. ``limit`` bounds the cache (least recently used goes first) where addresses come and go
without anyone saying so (a master restarted on a new port leaves its old address behind); where
the owner learns that a server left, it calls :meth:`Channels.drop`. A channel that leaves the
cache is closed in the background; :meth:`Channels.close` closes everything, at shutdown.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict

from grpc import aio

from dsched.rpc import CHANNEL_OPTIONS


class Channels:
    """See the module docstring. Used on the event loop only."""

    def __init__(self, limit: int | None = None) -> None:
        self._limit = limit
        self._channels: OrderedDict[str, aio.Channel] = OrderedDict()
        self._closing: set[asyncio.Task[None]] = set()  # referenced until done, not collected

    def get(self, address: str) -> aio.Channel:
        channel = self._channels.get(address)
        if channel is None:
            channel = self._channels[address] = aio.insecure_channel(
                address, options=CHANNEL_OPTIONS
            )
            while self._limit is not None and len(self._channels) > self._limit:
                self._close_later(self._channels.popitem(last=False)[1])
        else:
            self._channels.move_to_end(address)
        return channel

    def drop(self, address: str) -> None:
        """Closes the channel to ``address`` (if any): the server there left."""
        channel = self._channels.pop(address, None)
        if channel is not None:
            self._close_later(channel)

    async def close(self) -> None:
        channels, self._channels = list(self._channels.values()), OrderedDict()
        for channel in channels:
            await channel.close()
        await asyncio.gather(*self._closing, return_exceptions=True)

    def _close_later(self, channel: aio.Channel) -> None:
        task = asyncio.get_running_loop().create_task(channel.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)
