"""Bounded shutdown of ``dsched master`` and ``dsched worker`` processes when what they depend on
is gone (README "Stopping"; ``dsched_server.lifecycle``).

With ZooKeeper killed (SIGKILL) or the database cut off (a TCP proxy that stops relaying, so every
call meets silence rather than a refusal), SIGTERM still ends each process within its
``shutdown_timeout`` (5 s here), with exit status 3 and a ``shutdown abandoned: ...`` line for each
thing it could not do; what it still could do (the master's hand-over while the database answers,
killing the worker's tasks) is done. A second signal exits at once, with 128 + its number, and the
worker's tasks die with it.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest
from sqlalchemy.engine import make_url

from dsched import Shell, TaskState, Workflow
from tests.cluster.harness import Cluster, Member
from tests.e2e.conftest import eventually, wait_done, wait_for_task
from tests.tcp_proxy import TcpProxy

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

SHUTDOWN_TIMEOUT_S = 5.0
# Beyond the bound: signal delivery and the exit of a Python process on a loaded 2-core machine.
MARGIN_S = 3.0
AT_ONCE_S = 2.0


def start_long_task(cluster: Cluster, name: str) -> list[int]:
    """Runs a workflow whose one task sleeps for ever; returns the worker's task processes."""
    client = cluster.client()
    with Workflow(name, project="shutdown") as wf:
        Shell("long", "sleep 1000")
    run = wf.run(client=client, wait=False)
    wait_for_task(client, run.id, "long", TaskState.RUNNING, timeout=60)
    (worker,) = cluster.workers()
    return eventually(lambda: cluster.task_pids(worker), timeout=10, what="the task process")


def signal_all(members: list[Member], sig: signal.Signals) -> float:
    for member in members:
        os.kill(member.pid, sig)
    return time.monotonic()


def exits(member: Member, since: float, timeout: float) -> tuple[int, float]:
    """(exit status, seconds from ``since`` to the exit as seen here; never less than the truth)."""
    code = member.proc.wait(timeout)
    member.state = "stopped"
    return code, time.monotonic() - since


def abandoned(member: Member) -> list[str]:
    return [
        line.split("shutdown abandoned: ", 1)[1]
        for line in member.log().splitlines()
        if "shutdown abandoned: " in line
    ]


@pytest.fixture
def bounded(cluster: Cluster) -> Iterator[Cluster]:
    cluster.settings["DSCHED_SHUTDOWN_TIMEOUT"] = f"{SHUTDOWN_TIMEOUT_S:g}"
    yield cluster


def test_zookeeper_gone_master_and_worker_stop_within_the_bound(bounded: Cluster) -> None:
    cluster = bounded
    cluster.start(masters=1, workers=1)
    (master,), (worker,) = cluster.masters(), cluster.workers()
    tasks = start_long_task(cluster, "zk-gone")
    cluster.zk.kill()
    sent = signal_all([master, worker], signal.SIGTERM)
    bound = SHUTDOWN_TIMEOUT_S + MARGIN_S
    (master_code, master_took), (worker_code, worker_took) = (
        exits(m, sent, bound + 10) for m in (master, worker)
    )
    print(f"\nZooKeeper gone: master stopped in {master_took:.1f}s, worker in {worker_took:.1f}s")
    assert master_took < bound and worker_took < bound, cluster.report_logs()
    assert (master_code, worker_code) == (3, 3), cluster.report_logs()

    # The master could not leave the registry, but handed its instance over (the database is up).
    master_node = f"/nodes/masters/{master.address}"
    assert [a for a in abandoned(master) if not a.startswith(f"remove {master_node} ")] == []
    assert f"instance(s) of master epoch {master.epoch} (was stopped)" in master.log()
    assert f"dsched master: stopped, abandoned: remove {master_node} from the registry" in (
        master.log()
    )
    # The worker could not leave the registry and had to kill its task (its master runs it again).
    worker_gone = abandoned(worker)
    assert any(
        a.startswith("task attempt ") and a.endswith(" killed: its master runs it again")
        for a in worker_gone
    ), worker_gone
    assert any(
        a.startswith(f"remove /nodes/workers/default@{worker.address} from the registry")
        for a in worker_gone
    ), worker_gone
    cluster.wait_dead(tasks, timeout=5)
    for member in (master, worker):
        assert "Traceback" not in member.log(), member.log_tail()


def test_database_gone_master_stops_within_the_bound(bounded: Cluster) -> None:
    cluster = bounded
    url = make_url(cluster.db_url)
    with TcpProxy(url.port or 5432) as proxy:
        cluster.db_url = url.set(host="127.0.0.1", port=proxy.port).render_as_string(
            hide_password=False
        )
        cluster.start(masters=1, workers=1)
        (master,) = cluster.masters()
        start_long_task(cluster, "db-gone")
        proxy.block()
        sent = signal_all([master], signal.SIGTERM)
        code, took = exits(master, sent, SHUTDOWN_TIMEOUT_S + MARGIN_S + 10)
    print(f"\ndatabase gone: master stopped in {took:.1f}s")
    assert took < SHUTDOWN_TIMEOUT_S + MARGIN_S, master.log_tail()
    assert code == 3, master.log_tail()
    handing_over = f"hand over the instances of epoch {master.epoch}: "
    assert any(a.startswith(handing_over) for a in abandoned(master)), master.log_tail()
    # ZooKeeper answers: the master left the registry at once instead of by session expiry.
    assert cluster.watcher is not None
    cluster.watcher.wait(master.address, "gone", after=sent, timeout=5)
    assert not any(a.startswith("remove /nodes/masters/") for a in abandoned(master))
    # An outage, not a bug: no traceback (the pooled connections are dropped, not closed).
    assert "Traceback" not in master.log(), master.log_tail()


def test_a_second_signal_exits_at_once(cluster: Cluster) -> None:
    cluster.start(masters=1, workers=1)
    (master,), (worker,) = cluster.masters(), cluster.workers()
    tasks = start_long_task(cluster, "second-signal")
    # The worker gives its task most of the default 30 s; a SIGINT meanwhile ends the stop.
    signal_all([worker], signal.SIGTERM)
    eventually(lambda: "dsched worker: shutting down" in worker.log(), what="the worker to stop")
    code, took = exits(worker, signal_all([worker], signal.SIGINT), AT_ONCE_S + MARGIN_S + 10)
    print(f"\nsecond signal: the worker exited {took:.2f}s after it")
    assert (code, took < AT_ONCE_S + MARGIN_S) == (128 + signal.SIGINT, True), worker.log_tail()
    assert "SIGINT again: exiting at once" in worker.log()
    assert "dsched worker: SIGINT again: exiting at once" in worker.log()
    # Its task did not outlive it: nothing supervises it any more.
    cluster.wait_dead(tasks, timeout=AT_ONCE_S)
    # Two signals in a row: the master is still stopping when the second arrives. Sent back to
    # back, they are taken in no set order (the kernel hands each to any of the process's
    # threads; two pending at once go lowest number first): the status is that of whichever it
    # took second, the one its log names.
    sent = signal_all([master], signal.SIGTERM)
    os.kill(master.pid, signal.SIGINT)
    code, took = exits(master, sent, AT_ONCE_S + MARGIN_S + 10)
    log = master.log()
    (second,) = [s for s in (signal.SIGINT, signal.SIGTERM) if f"{s.name} again: exiting" in log]
    assert code == 128 + second, master.log_tail()
    assert took < AT_ONCE_S + MARGIN_S


def test_a_graceful_worker_stop_lets_its_tasks_finish_and_runs_none_twice(cluster: Cluster) -> None:
    """SIGTERM to a worker with a task running longer than the failover delay: the worker stays
    registered (BUSY) while the task finishes, so no master fails the attempt over and runs it
    again on the other worker next to the copy still running here. The task runs exactly once."""
    cluster.start(masters=1, workers=2)
    client = cluster.client()
    run_s = cluster.timeouts.failover_delay + cluster.timeouts.session + 2
    with Workflow("drain", project="shutdown") as wf:
        Shell("long", f'echo "start $DSCHED_ATTEMPT"; sleep {run_s:g}; echo done')
    run = wf.run(client=client, wait=False)
    wait_for_task(client, run.id, "long", TaskState.RUNNING, timeout=60)
    ((host,),) = cluster.db_query(
        "SELECT host FROM task_instances WHERE workflow_instance_id = $1", run.id
    )
    busy = cluster.member_by_address("worker", str(host))
    (other,) = [w for w in cluster.workers() if w is not busy]
    assert cluster.stop(busy, timeout=60) == 0, busy.log_tail()
    final = wait_done(client, run.id, timeout=60)
    attempts = cluster.db_query(
        "SELECT attempt, state, host FROM task_instances WHERE workflow_instance_id = $1 "
        "ORDER BY attempt",
        run.id,
    )
    assert final.state.name == "SUCCEEDED", (attempts, cluster.report_logs())
    assert attempts == [(1, "SUCCEEDED", host)], cluster.report_logs()
    assert cluster.task_pids(other) == []
