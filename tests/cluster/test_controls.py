"""Pause, stop and resume sent to the master that does NOT drive the instance, on a real cluster
(``dsched master`` and ``dsched worker`` processes, ZooKeeper, PostgreSQL), through the Python SDK,
the ``dsched`` CLI and grpcurl; and with the owner killed -9 between the request and its
application, when the master that adopts the instance must apply it.

Every scenario reads the task ledger (a line per task run, written by the task itself) and asserts
that no task ran twice, that none the workflow still needed was lost, and that tasks a stop forbade
never started; the checker adds the cluster invariants (nothing stuck, no duplicate instance, no
duplicate fenced effect, no member crashed).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from dsched import Client, WorkflowState
from tests.cluster.checker import Report, check
from tests.cluster.harness import Cluster, Member
from tests.cluster.workload import PROJECT, define, since, start_many, wait_running
from tests.e2e.conftest import clean_env, eventually
from tests.integration.api.test_grpcurl import grpcurl_path

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

DSCHED = Path(sys.executable).parent / "dsched"
CALL_TIMEOUT_S = 60.0  # the server answers within 30 s at most (then PENDING)
DRAIN_S = 90.0
CHAIN = [("a", "b"), ("b", "c")]
STOPPING = {"READY_STOP", "STOPPED"}


def owner_of(cluster: Cluster, instance_id: int) -> Member:
    epoch = cluster.db.scalar("SELECT epoch FROM workflow_instances WHERE id = $1", instance_id)
    return cluster.member_by_epoch("master", int(epoch))


def other_master(cluster: Cluster, member: Member) -> Member:
    [other] = [m for m in cluster.masters() if m is not member]
    return other


def controls(cluster: Cluster, instance_id: int) -> list[tuple[str, str, str, str, int]]:
    """(request id, kind, requested by, outcome, applied by) of an instance's controls."""
    rows = cluster.db.query(
        "SELECT request_id, kind, requested_by, outcome, applied_by FROM control_requests "
        "WHERE workflow_instance_id = $1 ORDER BY id",
        instance_id,
    )
    return [(str(r[0]), str(r[1]), str(r[2]), str(r[3]), int(r[4])) for r in rows]


def starts(cluster: Cluster) -> Counter[tuple[int, str]]:
    """How many times each logical task (instance, task name) started, by the ledger."""
    return Counter(line.logical for line in cluster.ledger.lines() if line.kind == "start")


def state_of(cluster: Cluster, instance_id: int) -> str:
    return str(cluster.db.scalar("SELECT state FROM workflow_instances WHERE id = $1", instance_id))


def wait_state(cluster: Cluster, instance_id: int, state: str, timeout: float = DRAIN_S) -> None:
    eventually(
        lambda: state_of(cluster, instance_id) == state,
        timeout=timeout,
        interval=0.2,
        what=f"instance {instance_id} {state}",
    )


def cli(member: Member, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(DSCHED), "--server", member.address, "--project", PROJECT, *args],
        capture_output=True,
        text=True,
        timeout=CALL_TIMEOUT_S + 10,
        env=clean_env(),
        stdin=subprocess.DEVNULL,
    )


def grpcurl(member: Member, method: str, data: dict[str, object]) -> dict[str, object]:
    done = subprocess.run(
        [
            grpcurl_path(),
            "-plaintext",
            "-max-time",
            str(int(CALL_TIMEOUT_S)),
            "-d",
            json.dumps(data),
            member.address,
            f"dsched.v1.MasterService/{method}",
        ],
        capture_output=True,
        text=True,
        timeout=CALL_TIMEOUT_S + 10,
    )
    assert done.returncode == 0, done.stderr
    reply: dict[str, object] = json.loads(done.stdout)
    return reply


def publish(capsys: pytest.CaptureFixture[str], report: Report) -> None:
    with capsys.disabled():
        print(f"\n{report.line()}")


def test_sdk_cli_and_grpcurl_control_instances_through_the_master_that_does_not_drive_them(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster.start(masters=2, workers=1)
    chain = define(cluster, "chain", {"a": 12, "b": 0.5, "c": 0.5}, CHAIN)
    started = start_many(cluster, chain, 3)
    ids = sorted(started.values())
    wait_running(cluster, 3)
    owners = {i: owner_of(cluster, i) for i in ids}
    away = {i: other_master(cluster, owners[i]) for i in ids}
    by_sdk, by_cli, by_grpcurl = ids

    stopped = Client.connect(away[by_sdk].address, timeout=CALL_TIMEOUT_S).stop_instance(by_sdk)
    assert stopped.state in (WorkflowState.READY_STOP, WorkflowState.STOPPED)

    result = cli(away[by_cli], "stop", str(by_cli))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[:2] == ["instance", str(by_cli)]
    assert result.stdout.split()[2] in STOPPING, result.stdout

    paused = grpcurl(
        away[by_grpcurl],
        "PauseWorkflowInstance",
        {"id": by_grpcurl, "request_id": f"grpcurl-pause-{by_grpcurl}"},
    )
    assert paused["status"] == "CONTROL_STATUS_APPLIED", paused
    instance = paused["instance"]
    assert isinstance(instance, dict) and instance["state"] == "WORKFLOW_INSTANCE_STATE_READY_PAUSE"
    wait_state(cluster, by_grpcurl, "PAUSED")  # a finishes; b never starts while paused
    assert starts(cluster)[(by_grpcurl, "b")] == 0
    resumed = cli(away[by_grpcurl], "resume", str(by_grpcurl))
    assert resumed.returncode == 0, resumed.stderr

    report = check(cluster, "controls via the other master", started, drain_timeout=DRAIN_S)
    publish(capsys, report)
    report.assert_invariants(tolerate=("failed",))  # two are STOPPED on purpose
    assert {i: state_of(cluster, i) for i in ids} == {
        by_sdk: "STOPPED",
        by_cli: "STOPPED",
        by_grpcurl: "SUCCEEDED",
    }
    assert starts(cluster) == {
        (by_sdk, "a"): 1,
        (by_cli, "a"): 1,
        (by_grpcurl, "a"): 1,
        (by_grpcurl, "b"): 1,
        (by_grpcurl, "c"): 1,
    }, "a task ran twice, or one a stop forbade started, or one was lost"
    for i in ids:  # recorded by the master asked, applied by the owner, which kept the instance
        [(_, kind, by, outcome, applied_by)] = controls(cluster, i)
        assert (kind, by, outcome) == (
            "PAUSE" if i == by_grpcurl else "STOP",
            away[i].address,
            "APPLIED",
        )
        assert applied_by == owners[i].epoch
    assert report.reruns == 0 and report.raw_dup_concurrent == 0, report.details


def test_controls_recorded_while_the_owner_is_frozen_then_killed_are_applied_by_the_adopter(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    # The owner is frozen (SIGSTOP) so that it cannot apply anything, the controls go to the other
    # master (which records them and keeps nudging the frozen owner), then the owner is killed -9.
    # The survivor adopts both instances, applies the controls on restore, and the calls return.
    cluster.start(masters=2, workers=2)
    to_stop = define(cluster, "to-stop", {"a": 30, "b": 0.5, "c": 0.5}, CHAIN)
    to_pause = define(cluster, "to-pause", {"a": 10, "b": 0.5, "c": 0.5}, CHAIN)
    first = cluster.masters()[0]
    stop_rid, pause_rid = "stop-while-frozen", "pause-while-frozen"
    started = {}
    for name in (to_stop, to_pause):  # asked of one master: it claims both itself
        rid = f"{name}-start"
        started[rid] = cluster.client(first).start_workflow(PROJECT, name, request_id=rid).id
    stop_id, pause_id = started[f"{to_stop}-start"], started[f"{to_pause}-start"]
    wait_running(cluster, 2)
    victim = owner_of(cluster, stop_id)
    assert owner_of(cluster, pause_id) is victim
    survivor = other_master(cluster, victim)

    cluster.pause(victim)
    client = Client.connect(survivor.address, timeout=CALL_TIMEOUT_S)
    with ThreadPoolExecutor(2) as pool:
        stopping = pool.submit(client.stop_instance, stop_id, request_id=stop_rid)
        pausing = pool.submit(client.pause_instance, pause_id, request_id=pause_rid)
        eventually(
            lambda: (
                [c[3] for c in controls(cluster, stop_id) + controls(cluster, pause_id)]
                == ["PENDING", "PENDING"]
            ),
            timeout=20,
            interval=0.05,
            what="both controls recorded, not applied",
        )
        t_kill = cluster.kill9(victim)
        stopped, paused = stopping.result(), pausing.result()
    applied_after = since(t_kill)

    assert stopped.state in (WorkflowState.READY_STOP, WorkflowState.STOPPED)
    assert paused.state in (WorkflowState.READY_PAUSE, WorkflowState.PAUSED)
    assert controls(cluster, stop_id) == [
        (stop_rid, "STOP", survivor.address, "APPLIED", survivor.epoch)
    ]
    assert controls(cluster, pause_id) == [
        (pause_rid, "PAUSE", survivor.address, "APPLIED", survivor.epoch)
    ]
    wait_state(cluster, stop_id, "STOPPED")
    wait_state(cluster, pause_id, "PAUSED")
    assert starts(cluster) == {(stop_id, "a"): 1, (pause_id, "a"): 1}
    assert client.resume_instance(pause_id).state in (
        WorkflowState.SUBMITTED,
        WorkflowState.RUNNING,
    )

    report = check(
        cluster,
        "controls recorded while the owner died",
        started,
        drain_timeout=DRAIN_S,
        timings={"T_applied_after_kill": applied_after},
    )
    publish(capsys, report)
    report.assert_invariants(tolerate=("failed",))  # the stopped one, on purpose
    assert (state_of(cluster, stop_id), state_of(cluster, pause_id)) == ("STOPPED", "SUCCEEDED")
    # No task ran twice; the tasks the stop forbade never started; none the resumed run needed was
    # lost; the running tasks were adopted (one attempt each), not run again.
    assert starts(cluster) == {
        (stop_id, "a"): 1,
        (pause_id, "a"): 1,
        (pause_id, "b"): 1,
        (pause_id, "c"): 1,
    }
    assert report.reruns == 0, report.details
    assert report.raw_dup_concurrent == 0 and report.raw_dup_success == 0, report.details
    time_to_apply = report.timings["T_applied_after_kill"]
    assert time_to_apply < 30, time_to_apply
