"""Which registry a server process uses: the one place settings become a registry client."""

from __future__ import annotations

from dsched_server.config import Settings
from dsched_server.coord.embedded import EmbeddedRegistry
from dsched_server.coord.ensemble import EmbeddedEnsemble
from dsched_server.coord.registry import Registry
from dsched_server.coord.zookeeper import ZooKeeperRegistry


def open_registry(settings: Settings, ensemble: EmbeddedEnsemble | None = None) -> Registry:
    """A new, not yet started registry client (one session) for ``settings``.

    The embedded registry lives in this process, so it needs the process's ``ensemble``
    (ValueError without one); otherwise it is ZooKeeper at ``settings.registry`` with the
    configured session timeout and digest credentials.
    """
    if settings.embedded_registry:
        if ensemble is None:
            raise ValueError("the embedded registry needs the ensemble of this process")
        return EmbeddedRegistry(ensemble)
    hosts, chroot = settings.zookeeper
    return ZooKeeperRegistry(
        hosts,
        chroot=chroot,
        session_timeout=settings.registry_session_timeout,
        auth=settings.registry_credentials,
    )
