"""The MasterService servicer, assembled from its parts (one mixin per area)."""

from __future__ import annotations

from dsched.v1 import master_service_pb2_grpc
from dsched_server.api.backfills import BackfillsApi
from dsched_server.api.context import MasterContext
from dsched_server.api.controls import ControlsApi
from dsched_server.api.datasources import DatasourcesApi
from dsched_server.api.definitions import DefinitionsApi
from dsched_server.api.history import HistoryApi
from dsched_server.api.queries import QueriesApi
from dsched_server.api.runs import RunsApi
from dsched_server.api.schedules import SchedulesApi


class MasterServicer(
    DefinitionsApi,
    RunsApi,
    ControlsApi,
    QueriesApi,
    HistoryApi,
    BackfillsApi,
    SchedulesApi,
    DatasourcesApi,
    master_service_pb2_grpc.MasterServiceServicer,
):
    """Every MasterService RPC; the mixins share ``ctx``."""

    def __init__(self, ctx: MasterContext) -> None:
        self.ctx = ctx
