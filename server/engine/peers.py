"""Calls to the other masters (``MasterPeerService``): the wake-up that makes an owner apply the
controls another master recorded for it (ARCHITECTURE.md §4).

A nudge carries no authority, only an instance id: the controls are in the store, so a lost or
repeated nudge changes nothing. Channels are cached per address; the cache is bounded because a
master restarted on a new port leaves its old address behind.
"""

from __future__ import annotations

import logging
from collections import OrderedDict

from grpc import aio

from dsched.server.rpc.serving import CHANNEL_OPTIONS
from dsched.v1 import master_peer_service_pb2 as pb
from dsched.v1 import master_peer_service_pb2_grpc

log = logging.getLogger(__name__)

MAX_CHANNELS = 32


class Peers:
    """Channels to other masters. ``close`` (at shutdown) closes them."""

    def __init__(self) -> None:
        self._channels: OrderedDict[str, aio.Channel] = OrderedDict()
        self._closing: set[aio.Channel] = set()

    async def apply_controls(self, address: str, instance_id: int, timeout: float) -> bool:
        """Asks the master at ``address`` to apply the controls of ``instance_id`` now; True once
        it did, False if it does not drive the instance or cannot be reached within ``timeout``."""
        stub = master_peer_service_pb2_grpc.MasterPeerServiceStub(self._channel(address))
        try:
            reply = await stub.ApplyControls(
                pb.ApplyControlsRequest(instance_id=instance_id), timeout=timeout
            )
        except aio.AioRpcError as err:
            log.info("nudge of %s for instance %s: %s", address, instance_id, err.code().name)
            return False
        return reply.driven

    def _channel(self, address: str) -> aio.Channel:
        channel = self._channels.get(address)
        if channel is None:
            channel = self._channels[address] = aio.insecure_channel(
                address, options=CHANNEL_OPTIONS
            )
            while len(self._channels) > MAX_CHANNELS:
                _, old = self._channels.popitem(last=False)
                self._closing.add(old)
        else:
            self._channels.move_to_end(address)
        return channel

    async def close(self) -> None:
        for channel in [*self._channels.values(), *self._closing]:
            await channel.close()
        self._channels.clear()
        self._closing.clear()
