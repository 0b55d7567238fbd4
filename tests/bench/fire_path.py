"""The scheduler's fire path alone: N online schedules due on the same second, fired by
:class:`~dsched_server.app.scheduler.Scheduler` on a fresh SQLite store in this process, with a
clock the bench sets (no server, no API, no worker, no command consumer). What ``make
bench-storm``'s "durable" figure costs when nothing else wants the event loop, in about 10 s
instead of its minutes; ``--profile`` prints cProfile's top functions.

Usage: ``python -m tests.bench.fire_path [--schedules N] [--profile]`` from the repository root.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import sys
import tempfile
import time
from datetime import UTC, datetime

from dsched.options import ReleaseState
from dsched_server.app.context import AppContext
from dsched_server.app.scheduler import Scheduler
from dsched_server.core.schedule import ScheduleSpec
from dsched_server.engine.notifier import Notifier
from dsched_server.engine.peers import Peers
from dsched_server.engine.runners import Runners
from dsched_server.store import definitions
from dsched_server.store import schedules as store
from dsched_server.store.database import Database
from tests.unit.core.specs import task, workflow

T0 = datetime(2026, 1, 5, 9, 59, 30, tzinfo=UTC)
FIRE = datetime(2026, 1, 5, 10, tzinfo=UTC)


class _Clock:
    def __init__(self) -> None:
        self.at = T0

    def now(self) -> datetime:
        return self.at

    def monotonic(self) -> float:
        return self.at.timestamp()


async def fire(count: int, profile: bool) -> tuple[float, float]:
    """Seconds the scheduler took to fire ``count`` schedules due at once: wall time, and this
    process's CPU time (on a shared machine the wall time is mostly waiting for a core)."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(f"sqlite:///{tmp}/dsched.db")
        await db.start()
        clock, peers = _Clock(), Peers()
        ctx = AppContext(
            db=db,
            clock=clock,
            notifier=Notifier(),
            runners=Runners(),
            peers=peers,
            address="",
            owner_cluster_address=lambda _address: "",
            epoch=lambda: 1,
        )
        spec = workflow(task("a"))
        async with db.transaction() as conn:
            await definitions.create_project(conn, spec.project, "", T0)
            await definitions.create_workflow(conn, spec, T0)
            await definitions.set_release_state(
                conn, spec.project, spec.name, ReleaseState.ONLINE, T0
            )
            record = await definitions.get_workflow(conn, spec.project, spec.name)
            for _ in range(count):
                schedule_id = await store.create(conn, record, ScheduleSpec(cron="0 10 * * *"), T0)
                await store.set_online(conn, schedule_id, True, FIRE, T0)
        scheduler = Scheduler(ctx, slot=lambda: (0, 1), enabled=lambda: True, refresh=3600.0)
        await scheduler.pass_once()  # loads the share
        clock.at = FIRE
        profiler = cProfile.Profile() if profile else None
        began, cpu = time.perf_counter(), time.process_time()
        if profiler is not None:
            profiler.enable()
        fired = await scheduler.pass_once()
        if profiler is not None:
            profiler.disable()
        took = time.perf_counter() - began, time.process_time() - cpu
        assert fired == count, fired
        if profiler is not None:
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)
        await peers.close()
        await db.stop()
        return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=10_000)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    wall, cpu = asyncio.run(fire(args.schedules, args.profile))
    print(
        f"fire path: {args.schedules} schedules due at once fired in {wall:.2f} s wall, "
        f"{cpu:.2f} s CPU ({1000 * cpu / args.schedules:.3f} ms CPU each); load average "
        f"{load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
