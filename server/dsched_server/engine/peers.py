"""Calls to the other masters (``MasterPeerService``): the wake-up that makes an owner apply the
controls another master recorded for it (ARCHITECTURE.md §4).

A nudge carries no authority, only an instance id: the controls are in the store, so a lost or
repeated nudge changes nothing. Channels are cached per address; the cache is bounded because a
master restarted on a new port leaves its old address behind (a nudge cut short when its channel is
evicted is one of those lost nudges).
"""

from __future__ import annotations

import logging

from grpc import aio

from dsched.v1 import master_peer_service_pb2 as pb
from dsched.v1 import master_peer_service_pb2_grpc
from dsched_server.rpc.channels import Channels

log = logging.getLogger(__name__)

MAX_CHANNELS = 32


class Peers:
    """Channels to other masters. ``close`` (at shutdown) closes them."""

    def __init__(self) -> None:
        self._channels = Channels(limit=MAX_CHANNELS)

    async def apply_controls(self, address: str, instance_id: int, timeout: float) -> bool:
        """Asks the master at ``address`` to apply the controls of ``instance_id`` now; True once
        it did, False if it does not drive the instance or cannot be reached within ``timeout``."""
        stub = master_peer_service_pb2_grpc.MasterPeerServiceStub(self._channels.get(address))
        try:
            reply = await stub.ApplyControls(
                pb.ApplyControlsRequest(instance_id=instance_id), timeout=timeout
            )
        except aio.AioRpcError as err:
            log.info("nudge of %s for instance %s: %s", address, instance_id, err.code().name)
            return False
        return reply.driven

    async def close(self) -> None:
        await self._channels.close()
