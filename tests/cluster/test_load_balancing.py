"""Load balancing across a real cluster: three equal workers share a 300-task fan-out.

One master, three workers of one group with the same slots (the harness's 8), ZooKeeper and
PostgreSQL; warm-up is off (``DSCHED_WARMUP_SECONDS=0``) so that start order does not weigh. One
workflow: a root, then 300 short leaves at once. Each leaf appends its name and its worker's
address to a file, so what actually ran is counted on the workers' side, next to the task instance
rows (``host``).

- ``lower_weight`` (the default): every worker takes between 20 % and 47 % of the leaves. The
  weights only change with heartbeats, so this holds only if the master spreads a burst of
  dispatches between two heartbeats instead of sending it all to the momentarily idlest worker.
- ``round_robin``: smooth weighted round robin over three near-equal weights: each share within
  8 points of a third. Here each worker has a slot per leaf, so none ever reports BUSY (full):
  a full worker is left out of the pick until its next heartbeat (overload protection, as in
  DolphinScheduler), which is right but is not the selector, and with 8 slots it cost one worker a
  third of its share in a CI run.

In both, all 300 succeed and none runs twice. The shares are printed (``pytest -s`` shows them).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from dsched import Shell, TaskState, Workflow
from tests.cluster.harness import Cluster
from tests.cluster.tuned import TunedCluster
from tests.conftest import _Server
from tests.e2e.conftest import eventually

LEAVES = 300
WORKERS = 3
RUN_TIMEOUT_S = 30.0

# Leaves sleep a little so that a burst really overlaps: with ``true`` alone a worker frees its
# slots about as fast as the master fills them, and balance would not be tested.
LEAF = 'sleep 0.05; echo "$DSCHED_TASK_NAME $DSCHED_WORKER_ADDRESS" >> {ran}'


@pytest.fixture
def tuned_cluster(
    request: pytest.FixtureRequest, tmp_path: Path, _servers: dict[str, _Server]
) -> Iterator[TunedCluster]:
    """A cluster whose members get ``DSCHED_HOST_SELECTOR=<param>`` and no warm-up."""
    settings = {"DSCHED_HOST_SELECTOR": str(request.param), "DSCHED_WARMUP_SECONDS": "0"}
    with _servers["postgresql"].database() as db_url:
        cluster = TunedCluster(tmp_path / "run", db_url, settings)
        try:
            yield cluster
        finally:
            cluster.close()


def run_fanout(cluster: Cluster, ran: Path) -> dict[str, int]:
    """Runs the root + ``LEAVES`` workflow and checks it ran each leaf exactly once; returns the
    leaves per worker address (from the task instance rows, checked against the workers' file)."""
    client = cluster.client()
    with Workflow("balance", project="balance") as wf:
        root = Shell("root", "true")
        root >> [Shell(f"leaf{i:03d}", LEAF.format(ran=ran)) for i in range(LEAVES)]
    wf.submit(client)
    instance = wf.run(wait=True, client=client, timeout=RUN_TIMEOUT_S)
    assert instance.state == "SUCCEEDED", instance

    tasks = list(client.iter_task_instances(instance.id, page_size=1000))
    leaves = [t for t in tasks if t.task_name != "root"]
    assert len(tasks) == LEAVES + 1
    assert all(t.state is TaskState.SUCCEEDED and t.attempt == 1 for t in tasks)
    by_host = Counter(t.host for t in leaves)

    # What the workers ran: every leaf once, on the worker its row names.
    lines = [line.split() for line in ran.read_text().splitlines()]
    names = Counter(name for name, _ in lines)
    assert len(names) == LEAVES and set(names.values()) == {1}, names.most_common(3)
    assert {name: host for name, host in lines} == {t.task_name: t.host for t in leaves}
    return dict(by_host)


def start(cluster: TunedCluster) -> list[str]:
    """Starts one master and the workers; returns the workers' addresses once the master sees
    every one of them with a positive weight (NORMAL, not warming up)."""
    roomy = cluster.settings["DSCHED_HOST_SELECTOR"] == "round_robin"
    cluster.start(masters=1, workers=0)
    for _ in range(WORKERS):
        cluster.add_worker(slots=LEAVES if roomy else 8)
    addresses = sorted(w.address for w in cluster.workers())
    client = cluster.client()

    def all_weighted() -> bool:
        members = client.cluster_members(role="WORKER")
        return sorted(m.address for m in members if m.weight > 0) == addresses

    eventually(all_weighted, timeout=15, what="the master weighs all three workers")
    # The readings the first picks go by: when a share is off, these usually say why.
    for m in client.cluster_members(role="WORKER"):
        print(
            f"\n{m.address}: weight {m.weight:.4f}, cpu {m.cpu_usage:.4f}, "
            f"memory {m.memory_usage:.4f}, load {m.load_average:.4f}, "
            f"slots {m.slots_in_use}/{m.slots_total}",
            end="",
        )
    return addresses


def shares(by_host: Mapping[str, int], addresses: list[str]) -> dict[str, float]:
    share = {a: by_host.get(a, 0) / LEAVES for a in addresses}
    print(
        "\nleaves per worker: "
        + ", ".join(f"{a} {by_host.get(a, 0)} ({share[a]:.1%})" for a in addresses)
    )
    return share


def checked(cluster: TunedCluster, tmp_path: Path) -> dict[str, float]:
    """Starts, runs and returns the shares; on failure prints the members' logs first."""
    try:
        addresses = start(cluster)
        by_host = run_fanout(cluster, tmp_path / "ran.txt")
        assert set(by_host) <= set(addresses), (by_host, addresses)
        return shares(by_host, addresses)
    except BaseException:
        print(f"\n----- cluster logs ({cluster.run_dir}) -----\n{cluster.report_logs()}")
        raise


# Share of the leaves each worker must get, by selector (see the module docstring).
BOUNDS = {"lower_weight": (0.20, 0.47), "round_robin": (1 / 3 - 0.08, 1 / 3 + 0.08)}


@pytest.mark.slow
@pytest.mark.parametrize("tuned_cluster", list(BOUNDS), indirect=True)
def test_every_worker_gets_its_share_of_a_burst(
    tuned_cluster: TunedCluster, tmp_path: Path
) -> None:
    low, high = BOUNDS[tuned_cluster.settings["DSCHED_HOST_SELECTOR"]]
    share = checked(tuned_cluster, tmp_path)
    assert all(low <= s <= high for s in share.values()), share
