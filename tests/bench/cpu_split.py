"""Where the CPU of a fan-out goes: milliseconds per task by process, beside the spawn floor's.

Starts ``dsched standalone`` as the bench does, warms it up with a short chain, then measures
``--repeat`` times, alternating: the spawn floor (``bash -c true`` from this process, as the bench
measures it) and a fan-out of ``--fanout`` ``true`` tasks. For each it prints tasks per second and
the CPU per task (user + system) of the master process, the worker process (its own, then the task
processes it reaped), and this client process, each with its kernel part. On a machine with N cores
the fan-out cannot beat N / (CPU per task); the split says which process to make cheaper.

Usage: ``python -m tests.bench.cpu_split [--fanout N] [--repeat N] [--slots N]`` from the
repository root.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import psutil

from dsched import Client
from tests.bench.common import default_slots, run_chain, run_fanout, settle, spawn_floor
from tests.bench.standalone_bench import standalone

SYSTEM = ".sys"  # the kernel's part of a process's figure


@dataclass(frozen=True, slots=True)
class Sample:
    """CPU seconds used so far: (own, reaped children) per process name, and the kernel's part
    of each under ``<name>.sys``."""

    cpu: dict[str, tuple[float, float]]

    @staticmethod
    def take(procs: dict[str, psutil.Process]) -> Sample:
        found = {}
        for name, proc in procs.items():
            t = proc.cpu_times()
            found[name] = (t.user + t.system, t.children_user + t.children_system)
            found[name + SYSTEM] = (t.system, t.children_system)
        return Sample(found)

    def minus(self, before: Sample) -> dict[str, tuple[float, float]]:
        return {
            name: (own - before.cpu[name][0], kids - before.cpu[name][1])
            for name, (own, kids) in self.cpu.items()
        }


def split(procs: dict[str, psutil.Process], count: int, work: Callable[[], float]) -> str:
    """Runs ``work`` (returns tasks per second) and renders the CPU per task by process."""
    before = Sample.take(procs)
    rate = work()
    used = Sample.take(procs).minus(before)
    parts = [f"{rate:6.0f} tasks/s"]
    total = 0.0
    for name, (own, kids) in used.items():
        parts.append(f"{name} {own / count * 1000:.2f}+{kids / count * 1000:.2f}")
        if not name.endswith(SYSTEM):  # a part of its process's figure, not more of it
            total += own + kids
    parts.append(f"total {total / count * 1000:.2f} ms/task")
    return "  ".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fanout", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--slots", type=int, default=default_slots())
    parser.add_argument(
        "--no-settle", action="store_true", help="measure at once (see common.SETTLE_S)"
    )
    args = parser.parse_args(argv)
    if not args.no_settle:
        settle("CPU split")
    with standalone(args.slots) as (address, pids), Client.connect(address) as client:
        client.ensure_project("bench")
        run_chain(client, 20)  # warm-up: imports, connections, SQLite pages
        procs = {"client": psutil.Process(os.getpid()), "master": psutil.Process(pids[0])}
        if len(pids) > 1:
            procs["worker"] = psutil.Process(pids[1])
        print("CPU per task in ms, own+reaped children, by process")
        for _ in range(args.repeat):
            floor = split(procs, args.fanout, lambda: spawn_floor(args.fanout, args.slots))
            print(f"floor   {floor}")
            fan = split(
                procs, args.fanout + 1, lambda: run_fanout(client, args.fanout, pids).throughput
            )
            print(f"fan-out {fan}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
