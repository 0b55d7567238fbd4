"""F6: the metadata database stops for 10 s and for 60 s under load, then starts again.

Two masters and two workers on a PostgreSQL server of the test's own (``pg_cluster``), which is
stopped the way a service stop does it (a fast shutdown: open sessions are terminated, new ones
refused) and started again on the same data directory. Twenty ``a -> b, c, d -> e`` workflows of
short ledger tasks are started half a second apart, and the database goes away while they run and
while starts are still coming in.

Nothing is restarted. Afterwards every instance must be SUCCEEDED with each task run exactly once
(the raw ledger of task starts), every member still up, every start made while the database was
away answered UNAVAILABLE with reason DATABASE_UNAVAILABLE (and accepted when retried with the same
request id), each master's health NOT_SERVING during the outage and SERVING after, and no traceback
in any log. Some tasks must have ended while the database was away: their results could not be
recorded then, which is what used to leave instances RUNNING for ever.

The tasks write no fenced effect: the effect sink is the metadata database itself, so a task that
writes one could not end while the database is away, the very case under test. There is no
failover here (no attempt is re-run), which is what the fenced ledger guards.

Printed: for every instance, the seconds from the database's return to the instance's end, and the
scenario's report line.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from dsched import DschedError, Unavailable
from dsched.rpc import CHANNEL_OPTIONS
from tests.cluster.checker import check
from tests.cluster.harness import Cluster, Member
from tests.cluster.workload import PROJECT, define, wait_running
from tests.e2e.conftest import eventually
from tests.postgres import PostgresServer

pytestmark = [pytest.mark.slow]

WORKFLOWS = 20
START_GAP_S = 0.5
TASK_S = 2.0
FAN = [("a", "b"), ("a", "c"), ("a", "d"), ("b", "e"), ("c", "e"), ("d", "e")]
# When the database goes: this many instances started and attempts running (work in flight).
STARTED_BEFORE = 8
RUNNING_BEFORE = 4
RETRY_START_S = 0.5
DRAIN_S = 180.0
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


@dataclass(eq=False)  # a Thread must stay hashable
class Starter(threading.Thread):
    """Starts WORKFLOWS runs START_GAP_S apart, round the masters. A start answered UNAVAILABLE
    is tried again (same request id, next master) every RETRY_START_S until it is accepted; every
    failure is recorded with its reason."""

    cluster: Cluster
    masters: list[Member]
    workflow: str
    started: dict[str, int] = field(default_factory=dict)
    unavailable: list[tuple[float, str]] = field(default_factory=list)  # (monotonic, reason)
    other_errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__(name="starter", daemon=True)

    def run(self) -> None:
        for i in range(WORKFLOWS):
            rid = f"outage-{i}-{time.monotonic_ns()}"
            turn = i
            while rid not in self.started:
                client = self.cluster.client(self.masters[turn % len(self.masters)])
                turn += 1
                try:
                    run = client.start_workflow(PROJECT, self.workflow, request_id=rid)
                except Unavailable as exc:
                    self.unavailable.append((time.monotonic(), exc.reason))
                    time.sleep(RETRY_START_S)
                    continue
                except DschedError as exc:
                    self.other_errors.append(f"{type(exc).__name__} {exc.reason}: {exc}")
                    return
                self.started[rid] = run.id
            time.sleep(START_GAP_S)


class Health:
    """The overall gRPC health of each master, asked directly (grpc.health.v1 Check)."""

    def __init__(self, masters: list[Member]) -> None:
        self._channels = {
            m.name: grpc.insecure_channel(m.address, options=CHANNEL_OPTIONS) for m in masters
        }

    def statuses(self) -> dict[str, int]:
        out = {}
        for name, channel in self._channels.items():
            stub = health_pb2_grpc.HealthStub(channel)
            out[name] = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=5).status
        return out

    def close(self) -> None:
        for channel in self._channels.values():
            channel.close()


def finish_times(cluster: Cluster, back_wall: float) -> dict[int, tuple[str, float]]:
    """Instance id -> (state, seconds from the database's return to its end; negative: it ended
    before). The masters stamp end times with this host's clock, in UTC."""
    rows = cluster.db.query(
        "SELECT id, state, extract(epoch FROM end_time) FROM workflow_instances ORDER BY id"
    )
    return {
        int(r[0]): (str(r[1]), float("nan") if r[2] is None else float(r[2]) - back_wall)
        for r in rows
    }


@pytest.mark.parametrize(
    "outage_s",
    [
        pytest.param(10.0, id="10s", marks=pytest.mark.timeout(360)),
        pytest.param(60.0, id="60s", marks=pytest.mark.timeout(480)),
    ],
)
def test_database_outage_under_load(
    pg_cluster: tuple[Cluster, PostgresServer],
    capsys: pytest.CaptureFixture[str],
    outage_s: float,
) -> None:
    cluster, pg = pg_cluster
    cluster.start(masters=2, workers=2)
    masters = cluster.masters()
    fan = define(cluster, "fan", {task: TASK_S for task in "abcde"}, FAN, effect=False)
    health = Health(masters)
    starter = Starter(cluster, masters, fan)
    try:
        starter.start()
        eventually(lambda: len(starter.started) >= STARTED_BEFORE, timeout=60, what="starts")
        wait_running(cluster, RUNNING_BEFORE)

        pg.stop()
        t_down, down_wall = time.monotonic(), time.time()
        not_serving: set[str] = set()
        while time.monotonic() < t_down + outage_s:  # the outage's length is fixed in advance
            not_serving |= {n for n, s in health.statuses().items() if s == NOT_SERVING}
            time.sleep(0.25)
        pg.start()
        t_up, back_wall = time.monotonic(), time.time()
        cluster.db.reconnect()

        eventually(
            lambda: set(health.statuses().values()) == {SERVING},
            timeout=30,
            what="every master SERVING again",
        )
        t_serving = time.monotonic() - t_up
        starter.join(DRAIN_S)
        assert not starter.is_alive(), "the starts did not all go through"
    finally:
        health.close()

    report = check(
        cluster,
        f"F6 database outage {outage_s:g}s",
        starter.started,
        drain_timeout=DRAIN_S,
        timings={"T_outage": t_up - t_down, "T_serving": t_serving},
    )
    finished = finish_times(cluster, back_wall)
    after = [t for _, t in finished.values() if t >= 0]
    report.timings["T_recover"] = max(after, default=0.0)
    during = [at for at, _ in starter.unavailable if t_down <= at <= t_up]
    ended = [x for x in cluster.ledger.lines() if x.kind == "end" and down_wall < x.at < back_wall]
    report.notes.update(
        tasks_ended_in_outage=len(ended),
        unavailable_starts=len(starter.unavailable),
        during_outage=len(during),
        reasons=sorted({reason for _, reason in starter.unavailable}),
        not_serving=sorted(not_serving),
    )
    with capsys.disabled():
        print(f"\n[F6 database outage {outage_s:g}s] instance ends, from the database's return")
        for wi, (state, t) in finished.items():
            when = f"{t:6.1f}s after" if t >= 0 else f"{-t:6.1f}s before"
            print(f"  instance {wi:3d} {state:9s} {when}")
        print(report.line())

    report.assert_invariants(tolerate={"fenced_missing"})  # no effects (see the module docstring)
    assert ended, "no task ended while the database was away"
    assert report.succeeded == WORKFLOWS, report.details
    assert report.reruns == 0, report.details  # no failover: nothing ran as a second attempt
    assert report.raw_dup_concurrent == 0 and report.raw_dup_success == 0, report.details
    assert report.runs == WORKFLOWS * 5, report.details  # every task ran, once
    assert report.tracebacks == 0, "a database outage is logged as one, not as a bug"
    assert all(m.alive for m in cluster.members), cluster.members
    assert not starter.other_errors, starter.other_errors
    assert during, "no start was made while the database was away"
    assert {reason for _, reason in starter.unavailable} == {"DATABASE_UNAVAILABLE"}
    assert not_serving == {m.name for m in masters}, "health NOT_SERVING during the outage"
