"""SPARK tasks against a real Spark standalone cluster started by the test (one master, one worker,
127.0.0.1): the application id (``app-…``) is recorded, a kill leaves no running application in
the master's ``/json/``, and a dsched worker killed with SIGKILL mid-job leads to exactly one
application running afterwards: the re-run's (ARCHITECTURE.md §15)."""

from __future__ import annotations

import os
import secrets
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsched import Client, Spark, TaskInstance, TaskState, Workflow, WorkflowState
from tests.e2e.conftest import Standalone, by_task, eventually, wait_done
from tests.e2e.spark_cluster import SparkCluster, spark_cluster
from tests.e2e.spark_jobs import (
    GATED_JOB,
    SPARK_TIMEOUT_S,
    release,
    running_with_application,
    standalone_for_spark,
    task_of,
    wait_for_log,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(900)]
__all__ = ["release"]  # the fixture


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    yield from spark_cluster(tmp_path_factory.mktemp("spark-cluster"))


@pytest.fixture(scope="module")
def dsched_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    yield from standalone_for_spark(tmp_path_factory.mktemp("dsched"), worker="process")


@pytest.fixture(scope="module")
def dsched_client(dsched_server: Standalone) -> Iterator[Client]:
    with Client.connect(dsched_server.address) as conn:
        yield conn


def _gated(name: str, cluster: SparkCluster, release: Path, app_name: str) -> Workflow:
    with Workflow(name, project="spark-cluster") as wf:
        Spark(
            "count",
            GATED_JOB,
            master=cluster.master_url,
            app_name=app_name,
            executor_memory="512m",
            # One core each: were a lost attempt's application left running, the re-run's would
            # still get an executor and both would show as active.
            conf={"spark.cores.max": "1", "spark.ui.enabled": "false"},
            args=[str(release)],
        )
    return wf


def test_kill_stops_the_application_on_the_cluster(
    cluster: SparkCluster, dsched_client: Client, release: Path
) -> None:
    app_name = f"dsched-kill-{secrets.token_hex(3)}"
    instance = _gated("kill", cluster, release, app_name).run(client=dsched_client, wait=False)
    ti = running_with_application(dsched_client, instance.id, "count")
    assert ti.application_id.startswith("app-"), ti
    wait_for_log(dsched_client, ti.id, "stage one done")
    assert cluster.apps(app_name)[0] == [ti.application_id]
    dsched_client.stop_instance(instance.id)
    assert wait_done(dsched_client, instance.id, SPARK_TIMEOUT_S).state is WorkflowState.STOPPED
    killed = task_of(dsched_client, instance.id, "count")
    assert killed is not None and killed.state is TaskState.KILLED, killed
    eventually(
        lambda: cluster.apps(app_name) == ([], [ti.application_id]),
        timeout=60,
        interval=0.5,
        what=f"no running application {app_name} in the master's /json/",
    )


def test_a_worker_killed_mid_job_leaves_exactly_one_application(
    cluster: SparkCluster, dsched_server: Standalone, dsched_client: Client, release: Path
) -> None:
    app_name = f"dsched-failover-{secrets.token_hex(3)}"
    wf = _gated("failover", cluster, release, app_name)
    instance = wf.run(client=dsched_client, wait=False)
    first = running_with_application(dsched_client, instance.id, "count")
    wait_for_log(dsched_client, first.id, "stage one done")
    assert cluster.apps(app_name)[0] == [first.application_id]
    worker = dsched_server.worker_pid
    assert worker is not None
    os.kill(worker, signal.SIGKILL)

    def rerun() -> TaskInstance | None:
        ti = task_of(dsched_client, instance.id, "count")
        if ti is None or ti.id == first.id or ti.state is not TaskState.RUNNING:
            return None
        return ti if ti.application_id else None

    second = eventually(rerun, timeout=SPARK_TIMEOUT_S, interval=0.5, what="the re-run's app")
    assert second.application_id != first.application_id, (first, second)
    # The re-run's worker was told of the lost application before it submitted.
    log = wait_for_log(dsched_client, second.id, "stage one done")
    assert f"spark application {first.application_id}" in log, log[:3000]
    eventually(
        lambda: cluster.apps(app_name)[0] == [second.application_id],
        timeout=60,
        interval=0.5,
        what="exactly the re-run's application running",
    )
    release.touch()
    done = wait_done(dsched_client, instance.id, SPARK_TIMEOUT_S)
    assert done.state is WorkflowState.SUCCEEDED, done
    active, completed = cluster.apps(app_name)
    assert active == [] and sorted(completed) == sorted(
        [first.application_id, second.application_id]
    ), (active, completed)
    attempts = by_task(dsched_client, instance.id)["count"]
    assert [t.application_id for t in attempts] == [first.application_id, second.application_id]
    assert attempts[-1].state is TaskState.SUCCEEDED and attempts[-1].out_params == {"groups": "7"}
