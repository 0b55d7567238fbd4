"""MasterPeerService: another master asks this one to apply the controls recorded for an instance
it drives (ARCHITECTURE.md §4). Served with the other cluster-internal services."""

from __future__ import annotations

from typing import Any

from grpc import aio

from dsched.v1 import master_peer_service_pb2 as pb
from dsched.v1 import master_peer_service_pb2_grpc
from dsched_server.api.context import MasterContext
from dsched_server.api.validation import Checks
from dsched_server.app import controls

Ctx = aio.ServicerContext[Any, Any]


class MasterPeerServicer(master_peer_service_pb2_grpc.MasterPeerServiceServicer):
    def __init__(self, ctx: MasterContext) -> None:
        self.ctx = ctx

    async def ApplyControls(self, request: pb.ApplyControlsRequest, context: Ctx) -> Any:
        checks = Checks()
        checks.positive_id("instance_id", request.instance_id)
        checks.raise_if_any()
        driven = await controls.apply_recorded(self.ctx, request.instance_id)
        return pb.ApplyControlsResponse(driven=driven)
