"""Heartbeats of a standalone: its master and worker share one host, so they must describe it alike.

The two heartbeats are taken a few milliseconds apart, each over the interval since its previous
one, so their CPU usage must agree closely; and the worker must never say BUSY (which keeps all work
away from it until its next heartbeat) while the master's sample of the same moment shows the host
well under the threshold. In one process (``--worker in-process``) the two share one measurement,
so BUSY is judged on the same reading and the readings agree; a worker process measures its own
window, beating at its own phase: paired with the master's nearest beat (windows overlapping by
half at least), it may straddle the threshold by the tolerance. Heartbeats are made frequent
(0.5 s) to see many of them in a few seconds.
"""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import pytest

from dsched import Client, ClusterMember, ServerRole, ServerStatus
from tests.e2e.conftest import clean_env, start_standalone

INTERVAL_S = 0.5
OBSERVE_S = 8.0
CPU_THRESHOLD = 0.9  # Settings.cpu_threshold default
# Two samples over windows of 0.5 s that overlap but for a few ms differ by a few percent at most.
TOLERANCE = 0.2


def _observe(client: Client, within: float) -> list[tuple[ClusterMember, ClusterMember]]:
    """(worker, master) heartbeat pairs taken within ``within`` seconds of each other."""
    beats: dict[tuple[ServerRole, object], ClusterMember] = {}
    deadline = time.monotonic() + OBSERVE_S
    while time.monotonic() < deadline:
        for member in client.cluster_members():
            beats[(member.role, member.report_time)] = member
        time.sleep(INTERVAL_S / 5)
    by_role: dict[ServerRole, list[ClusterMember]] = {ServerRole.MASTER: [], ServerRole.WORKER: []}
    for (role, _), member in sorted(beats.items(), key=lambda kv: str(kv[0][1])):
        by_role[role].append(member)
    pairs = []
    # The first heartbeat of each is measured from process start: not comparable.
    for worker in by_role[ServerRole.WORKER][1:]:
        for master in by_role[ServerRole.MASTER][1:]:
            assert worker.report_time is not None and master.report_time is not None
            if abs(master.report_time - worker.report_time) < timedelta(seconds=within):
                pairs.append((worker, master))
    return pairs


@pytest.mark.parametrize("worker", ["in-process", "process"])
def test_master_and_worker_of_a_standalone_agree_on_the_host(tmp_path: Path, worker: str) -> None:
    env = clean_env(DSCHED_HEARTBEAT_INTERVAL=str(INTERVAL_S))
    server = start_standalone(tmp_path / "data", env=env, worker=worker)
    shared = worker == "in-process"  # one measurement: no tolerance at the threshold
    try:
        with Client.connect(server.address) as client:
            # Beats of one process start together; a worker process beats at its own phase.
            pairs = _observe(client, INTERVAL_S / 5 if shared else INTERVAL_S / 2)
    finally:
        server.assert_clean_stop()
    assert len(pairs) >= OBSERVE_S / INTERVAL_S / 2, f"too few heartbeat pairs: {len(pairs)}"

    def show(worker: ClusterMember, master: ClusterMember) -> str:
        assert worker.report_time is not None
        return (
            f"{worker.report_time.time()}: worker cpu {worker.cpu_usage:.2f} {worker.status}, "
            f"master cpu {master.cpu_usage:.2f}"
        )

    assert all(w.slots_in_use < w.slots_total for w, _ in pairs)  # idle: only usage makes BUSY
    busy = [
        show(w, m)
        for w, m in pairs
        if w.status is ServerStatus.BUSY
        and m.cpu_usage < CPU_THRESHOLD - (0 if shared else TOLERANCE)
    ]
    # Windows of two processes overlap by half at least: only one measurement must agree closely.
    apart = [show(w, m) for w, m in pairs if shared and abs(w.cpu_usage - m.cpu_usage) > TOLERANCE]
    assert not busy and not apart, (
        f"of {len(pairs)} heartbeat pairs, {len(busy)} had an idle worker BUSY while the master "
        f"saw the host (well) under the CPU threshold, and {len(apart)} disagreed on CPU by more "
        f"than {TOLERANCE}:\n" + "\n".join(sorted(set(busy) | set(apart)))
    )
