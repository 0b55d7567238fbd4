"""MasterPeerService: another master asks this one to apply the controls recorded for an instance
it drives (ARCHITECTURE.md §4). Served with the other cluster-internal services."""

from __future__ import annotations

import asyncio
from typing import Any

from grpc import aio

from dsched.errors import OwnershipLost, Unavailable
from dsched.server.api.context import MasterContext
from dsched.server.api.validation import Checks
from dsched.server.engine.messages import ApplyControls
from dsched.v1 import master_peer_service_pb2 as pb
from dsched.v1 import master_peer_service_pb2_grpc

Ctx = aio.ServicerContext[Any, Any]


class MasterPeerServicer(master_peer_service_pb2_grpc.MasterPeerServiceServicer):
    def __init__(self, ctx: MasterContext) -> None:
        self.ctx = ctx

    async def ApplyControls(self, request: pb.ApplyControlsRequest, context: Ctx) -> Any:
        checks = Checks()
        checks.positive_id("instance_id", request.instance_id)
        checks.raise_if_any()
        runner = self.ctx.runners.get(request.instance_id)
        if runner is None or runner.done:
            return pb.ApplyControlsResponse(driven=False)
        reply: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        runner.post(ApplyControls(reply))
        try:
            await reply
        except (OwnershipLost, Unavailable):  # it stopped (moved, reloading) before getting to it
            return pb.ApplyControlsResponse(driven=False)
        return pb.ApplyControlsResponse(driven=True)
