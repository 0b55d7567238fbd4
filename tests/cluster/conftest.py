"""Fixtures of the cluster fault-injection tests.

``cluster``: a :class:`~tests.cluster.harness.Cluster` of the test's own: a run directory, a fresh
PostgreSQL database (dropped afterwards) and a private ZooKeeper (started by ``cluster.start``,
with the members the test asks for). Teardown kills every process the cluster started; when the
test failed it first prints the tail of every member's log (pytest shows it with the failure).
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from tests.cluster.harness import Cluster
from tests.conftest import _Server


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
            phases = request.node.stash.get(_PHASES, {})
            if any(r.failed for r in phases.values()):
                print(f"\n----- cluster logs ({run.run_dir}) -----\n{run.report_logs()}")
            run.close()
