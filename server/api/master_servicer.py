"""The MasterService servicer, assembled from its parts (one mixin per area)."""

from __future__ import annotations

from dsched.server.api.context import MasterContext
from dsched.server.api.controls import ControlsApi
from dsched.server.api.definitions import DefinitionsApi
from dsched.server.api.history import HistoryApi
from dsched.server.api.queries import QueriesApi
from dsched.server.api.runs import RunsApi
from dsched.v1 import master_service_pb2_grpc


class MasterServicer(
    DefinitionsApi,
    RunsApi,
    ControlsApi,
    QueriesApi,
    HistoryApi,
    master_service_pb2_grpc.MasterServiceServicer,
):
    """Every MasterService RPC; the mixins share ``ctx``."""

    def __init__(self, ctx: MasterContext) -> None:
        self.ctx = ctx
