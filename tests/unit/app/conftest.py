"""The application layer over a master's engine with fake workers (:mod:`tests.fakes.worker`),
no network: ``app`` is the context the master's handlers would use, built from ``engine``."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from dsched_server.app.context import AppContext
from dsched_server.engine.peers import Peers

# The engine tests' world (store, registry, fake workers) and one master engine in it.
from tests.unit.engine.conftest import Engine, engine, world  # noqa: F401


@pytest.fixture
async def app(engine: Engine) -> AsyncIterator[AppContext]:  # noqa: F811
    peers = Peers()  # never called: this master drives every instance here
    try:
        yield AppContext(
            db=engine.db,
            clock=engine.services.clock,
            notifier=engine.services.notifier,
            runners=engine.runners,
            peers=peers,
            address=engine.services.address,
            owner_cluster_address=lambda _address: "",
            epoch=lambda: engine.epoch,
        )
    finally:
        await peers.close()
