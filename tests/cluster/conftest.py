"""Fixtures of the cluster fault-injection tests.

``cluster``: a :class:`~tests.cluster.harness.Cluster` of the test's own: a run directory, a fresh
PostgreSQL database (dropped afterwards) and a private ZooKeeper (started by ``cluster.start``,
with the members the test asks for). Teardown kills every process the cluster started; when the
test failed it first prints the tail of every member's log (pytest shows it with the failure).

``pg_cluster``: the same on a private PostgreSQL server of the test's own
(:class:`~tests.postgres.PostgresServer`), which the test may stop and start: the shared server
must never be.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from tests.cluster.harness import Cluster
from tests.conftest import _Server
from tests.postgres import PostgresServer


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    # Remembers each phase's outcome on the item, so the fixture's teardown knows if the test
    # failed (pytest's documented recipe).
    report = yield
    item.stash.setdefault(_PHASES, {})[report.when] = report
    return report


_PHASES = pytest.StashKey[dict[str, pytest.TestReport]]()


@pytest.fixture
def cluster(
    request: pytest.FixtureRequest, tmp_path: Path, _servers: dict[str, _Server]
) -> Iterator[Cluster]:
    with _servers["postgresql"].database() as db_url:
        run = Cluster(tmp_path / "run", db_url)
        try:
            yield run
        finally:
            _close(request, run)


@pytest.fixture
def pg_cluster(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[Cluster, PostgresServer]]:
    with PostgresServer(tmp_path / "postgres") as pg:
        pg.psql("CREATE DATABASE dsched")
        run = Cluster(tmp_path / "run", pg.url("dsched"))
        try:
            yield run, pg
        finally:
            _close(request, run, f"=== postgres\n{pg.log_tail(30)}")


def _close(request: pytest.FixtureRequest, run: Cluster, *extra: str) -> None:
    """Tears the cluster down; if the test failed, first prints every member's log tail."""
    phases = request.node.stash.get(_PHASES, {})
    if any(r.failed for r in phases.values()):
        logs = "\n".join([run.report_logs(), *extra])
        print(f"\n----- cluster logs ({run.run_dir}) -----\n{logs}")
    run.close()
