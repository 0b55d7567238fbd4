"""Which registry a server process uses: the one place settings become a registry client."""

from __future__ import annotations

from dsched_server.config import Settings
from dsched_server.coord.embedded import EmbeddedRegistry
from dsched_server.coord.ensemble import EmbeddedEnsemble
from dsched_server.coord.grpc_registry import GrpcRegistry
from dsched_server.coord.registry import Registry
from dsched_server.coord.zookeeper import ZooKeeperRegistry


def open_registry(settings: Settings, ensemble: EmbeddedEnsemble | None = None) -> Registry:
    """A new, not yet started registry client (one session) for ``settings``.

    The embedded registry lives in this process, so it needs the process's ``ensemble``
    (ValueError without one); a standalone's worker process reaches that registry over gRPC
    (``grpc://host:port``); otherwise it is ZooKeeper at ``settings.registry`` with the
    configured session timeout and digest credentials.
    """
    if settings.embedded_registry:
        if ensemble is None:
            raise ValueError("the embedded registry needs the ensemble of this process")
        return EmbeddedRegistry(ensemble)
    if settings.registry_service is not None:
        return GrpcRegistry(
            settings.registry_service, session_timeout=settings.registry_session_timeout
        )
    hosts, chroot = settings.zookeeper
    return ZooKeeperRegistry(
        hosts,
        chroot=chroot,
        session_timeout=settings.registry_session_timeout,
        auth=settings.registry_credentials,
    )
