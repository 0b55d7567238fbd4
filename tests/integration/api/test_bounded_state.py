"""A long-lived server keeps no per-instance or per-attempt state once the instance ended and its
watchers left: watches (to the end, kept open and cancelled, of finished and of running
instances), log tails and runs all release what they took.

The assertions are sizes of the master's and the worker's in-memory maps, never memory or time.
"""

from __future__ import annotations

import asyncio

from dsched.v1 import log_service_pb2 as logs_pb
from dsched_worker.workdirs import POOL, POOL_MAX
from tests.integration.api.conftest import (
    SUCCEEDED,
    WAIT_S,
    Cluster,
    Gate,
    chain,
    enums,
    online_workflow,
    pb,
    run_to_end,
    shell,
    start,
    task_instances,
    task_is,
    watch_to_end,
    watch_until,
)

RUNS = 6


def held(c: Cluster) -> dict[str, int]:
    """Every map of the master and the worker that takes an entry per instance, attempt or
    watcher, by name -> size."""
    master, worker = c.master, c.worker
    assert master.reloads is not None and master.consumer is not None
    reporter = worker.reporter
    return {
        "notifier signals": len(master.notifier),
        "notifier local command hints": len(master.notifier.local_commands),
        "notifier command handovers": len(master.notifier.handovers),
        "runners": len(master.runners),
        "pending reloads": len(master.reloads._pending),
        "reload pins": len(master.reloads._pins),
        "dispatch queue": master.dispatcher.waiting,
        "commands first seen": len(master.consumer._first_seen),
        "worker attempts": len(worker.runner._attempts),
        "worker live logs": len(worker.logs._live),
        "reporter pending events": reporter.pending_count,
        "reporter attempts with events": len(reporter._by_key),
        "reporter attempt owners": len(reporter._owners),
        "reporter closed attempts": len(reporter._closed),
        "outbox pending events": len(reporter._outbox._pending),
        "outbox record sizes": len(reporter._outbox._record_sizes),
        "worker process groups": len(worker.records._live),
        "worker attempt tasks": len(worker.runner._tasks),
        "dispatcher tasks": len(master.dispatcher._tasks),
        **{
            f"stream to {address}: {name}": len(getattr(stream, name))
            for address, stream in reporter._streams.items()
            for name in ("_queue", "_inflight", "_held", "_retry_delays", "_timers")
        },
    }


async def all_released(c: Cluster) -> None:
    """Waits (bounded) until every map is empty: a cancelled stream's handler and an attempt's
    last acknowledgement finish a little after the client has its answer."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    sizes = held(c)
    while any(sizes.values()) and loop.time() < deadline:
        await asyncio.sleep(0.05)
        sizes = held(c)
    assert sizes == dict.fromkeys(sizes, 0)
    # On disk too: every attempt succeeded, so no working directory is left but the empty ones
    # kept for later attempts (a bounded pool).
    await c.worker.workdirs.wait_emptied()
    root = c.worker.workdirs.root
    assert {p.name for p in root.iterdir()} <= {".trash", POOL}
    assert not any((root / ".trash").glob("*"))
    pooled = list((root / POOL).glob("*"))
    assert len(pooled) <= POOL_MAX
    assert not any(any(p.iterdir()) for p in pooled)


async def cancelled_after_first_frame(c: Cluster, instance_id: int) -> None:
    """A kept-open watch, hung up by the client after its first frame."""
    call = c.stub.WatchWorkflowInstance(
        pb.WatchWorkflowInstanceRequest(id=instance_id, keep_open=True)
    )
    async with asyncio.timeout(WAIT_S):
        await call.read()
    call.cancel()


async def test_watches_and_runs_leave_nothing_behind(cluster: Cluster) -> None:
    await online_workflow(cluster, "p", "w", chain("a", "b"))
    ids = [(await start(cluster, "p", "w")).id for _ in range(RUNS)]
    # Running-then-finishing: each watched from its start to its end, all at once.
    watched = await asyncio.gather(*(run_to_end(cluster, i) for i in ids))
    assert {w.state for w in watched} == {SUCCEEDED}
    await all_released(cluster)

    # Finished instances watched again: to the end, resumed past the end, and kept open then
    # cancelled (the watch that used to leave a signal per instance behind).
    for i in ids:
        await watch_to_end(cluster, i)
        await watch_to_end(cluster, i, after=10_000)
        await cancelled_after_first_frame(cluster, i)
    # Their logs, read to the end and followed.
    for i in ids[:2]:
        for ti in await task_instances(cluster, i):
            request = logs_pb.TailTaskLogRequest(task_instance_id=ti.id, follow=True)
            frames = [f async for f in cluster.logs.TailTaskLog(request)]
            assert frames[-1].end_of_log
    await all_released(cluster)


async def test_a_watch_cancelled_while_the_instance_runs_leaves_nothing(
    cluster: Cluster, gate: Gate
) -> None:
    await online_workflow(cluster, "p", "held", [shell("wait", gate.wait)])
    inst = await start(cluster, "p", "held")
    await watch_until(cluster, inst.id, task_is("wait", enums.TASK_INSTANCE_STATE_RUNNING))
    # Watchers of the running instance, all hung up while it runs.
    for _ in range(RUNS):
        await cancelled_after_first_frame(cluster, inst.id)
    gate.open()
    await run_to_end(cluster, inst.id)
    await all_released(cluster)
