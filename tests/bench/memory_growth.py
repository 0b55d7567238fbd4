"""Memory a standalone keeps per run: a tracemalloc diff of a master and a worker in this process
over N one-task runs, each started and watched to its end twice (``dsched run --wait``, then a
second look), after a warm-up. Prints the bytes retained per run and the ten largest growths by
allocation site; a long-lived server should keep next to nothing (ARCHITECTURE.md §11; the worker's
memory of finished attempts, for idempotent re-dispatch, is the one expected entry: 16 bytes an
attempt, at most ``remember_finished`` of them, and it empties after one to two hours).

    .venv/bin/python -m tests.bench.memory_growth [RUNS]        # default 1000
"""

from __future__ import annotations

import asyncio
import gc
import sys
import tempfile
import tracemalloc
from pathlib import Path

from tests.integration.api.conftest import (
    Cluster,
    online_workflow,
    run_to_end,
    shell,
    start,
    start_cluster,
)

WARM_UP = 300


async def runs(c: Cluster, n: int) -> None:
    for _ in range(n):
        started = await start(c, "p", "w")
        await run_to_end(c, started.id)
        await run_to_end(c, started.id)


async def main(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp)
        async with start_cluster(f"sqlite+aiosqlite:///{path / 'dsched.db'}", path) as c:
            await online_workflow(c, "p", "w", [shell("t", "true")])
            await runs(c, WARM_UP)
            gc.collect()
            tracemalloc.start(8)
            before = tracemalloc.take_snapshot()
            await runs(c, n)
            gc.collect()
            after = tracemalloc.take_snapshot()
    stats = after.compare_to(before, "traceback")
    total = sum(s.size_diff for s in stats)
    print(f"retained: {total / 1024:.0f} KiB over {n} runs = {total / n:.0f} B per run")
    for stat in stats[:10]:
        # The innermost frame in dsched's own code says whose the memory is.
        ours = [f for f in stat.traceback if "/dsched/" in f.filename] or list(stat.traceback)
        where = f"{ours[-1].filename}:{ours[-1].lineno}"
        print(f"{stat.size_diff / 1024:9.1f} KiB {stat.count_diff:7d}  {where}")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000))
