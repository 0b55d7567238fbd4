"""The synchronous SDK client: one gRPC channel to a dsched master, typed results, dsched errors.

::

    with dsched.Client.connect("127.0.0.1:5678") as client:
        run = client.start_workflow("demo", "etl", params={"dt": "2024-01-01"})
        final = client.wait(run.id)

Every method mirrors one RPC of ``MasterService`` or ``LogService``; the calls are grouped by
subject in :mod:`dsched.definitions` and :mod:`dsched.instances`. Unary calls get a deadline
(``timeout``, 30 s by default); streams get none. Every gRPC failure is raised as the
:mod:`dsched.errors` class the server raised (see :mod:`dsched.status`); a server that cannot be
reached raises :class:`~dsched.errors.Unavailable`. Mutating calls send a ``request_id`` (a fresh
UUID4 unless given) so that a retried call does its work once. The channel connects lazily:
creating a client sends nothing, so a workflow can be validated without a server.

The *default client* is what :class:`dsched.Workflow` uses when no client is passed: the one set
with :meth:`Client.as_default`, else one connected to ``$DSCHED_SERVER`` on first use.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from datetime import timedelta
from typing import Self

import grpc

from dsched import coerce, convert
from dsched.backfills import BackfillCalls
from dsched.datasources import DatasourceCalls
from dsched.definitions import DefinitionCalls
from dsched.instances import InstanceCalls
from dsched.options import HistoryKind
from dsched.results import ClusterMember, HistoryTally, ServerInfo, ServerRole
from dsched.rpc import CHANNEL_OPTIONS
from dsched.rpc import request_id as request_id_or_new
from dsched.schedules import ScheduleCalls
from dsched.streams import Reconnect
from dsched.v1 import master_service_pb2

DEFAULT_TARGET = "127.0.0.1:5678"
ENV_SERVER = "DSCHED_SERVER"

_default: Client | None = None
_default_lock = threading.Lock()


class Client(DefinitionCalls, InstanceCalls, BackfillCalls, ScheduleCalls, DatasourceCalls):
    """A connection to a dsched master. Thread-safe; close it (or use ``with``) when done.

    Build one with :meth:`connect`; the constructor takes an existing channel (which the client
    then owns), for callers that need TLS or interceptors.
    """

    @classmethod
    def connect(
        cls,
        target: str | None = None,
        *,
        timeout: float = 30.0,
        reconnect: Reconnect | None = None,
    ) -> Client:
        """Creates a client for a master; nothing is sent until the first call.

        Args:
            target: "host:port"; default ``$DSCHED_SERVER``, else 127.0.0.1:5678.
            timeout: default deadline in seconds of unary calls.
            reconnect: how watch and log streams reopen after UNAVAILABLE.
        """
        address = target or os.environ.get(ENV_SERVER) or DEFAULT_TARGET
        channel = grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
        return cls(channel, timeout=timeout, target=address, reconnect=reconnect)

    def as_default(self) -> Self:
        """Makes this the client workflows use when none is passed; returns it."""
        global _default
        with _default_lock:
            _default = self
        return self

    def close(self) -> None:
        """Closes the channel (calls in flight end with CANCELLED); stops being the default."""
        global _default
        with _default_lock:
            if _default is self:
                _default = None
        super().close()

    def cluster_members(self, *, role: ServerRole | str | None = None) -> list[ClusterMember]:
        """Returns the live masters and workers: masters first, each group sorted by address."""
        req = master_service_pb2.ListClusterMembersRequest()
        member = coerce.optional_enum(ServerRole, role, "role")
        if member is not None:
            req.role = convert.SERVER_ROLE.number(member)
        resp = self._call(self._master.ListClusterMembers, req)
        return [convert.member_from_proto(m) for m in resp.members]

    def clean_up_history(
        self,
        older_than: timedelta | float,
        kinds: Iterable[HistoryKind | str],
        *,
        dry_run: bool = False,
        request_id: str | None = None,
    ) -> list[HistoryTally]:
        """Deletes history older than ``older_than`` (a timedelta or seconds; README
        "Retention"): ``kinds`` of
        :class:`~dsched.options.HistoryKind` (or their names). Never anything of an unfinished
        instance. ``dry_run`` deletes nothing and returns what would go. Deleting a large history
        takes a while: pass a ``timeout`` to :meth:`connect` that allows for it."""
        wanted = [coerce.enum_value(HistoryKind, k, "kinds") for k in kinds]
        req = master_service_pb2.CleanUpHistoryRequest(
            kinds=[convert.HISTORY_KIND.number(k) for k in wanted],
            dry_run=dry_run,
            request_id=request_id_or_new(request_id),
        )
        req.older_than.FromTimedelta(coerce.duration(older_than, "older_than"))
        resp = self._call(self._master.CleanUpHistory, req)
        return [convert.history_tally_from_proto(t) for t in resp.tallies]

    def server_info(self) -> ServerInfo:
        """Describes the server answering the call (version, role, address, start time)."""
        req = master_service_pb2.GetServerInfoRequest()
        return convert.server_info_from_proto(self._call(self._master.GetServerInfo, req))


def default_client() -> Client:
    """Returns the default client, connecting one to ``$DSCHED_SERVER`` on first use."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Client.connect()
        return _default
