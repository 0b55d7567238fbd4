"""Profile of the standalone server during the fan-out: a flame graph and a top table.

Starts ``dsched standalone`` as the bench does (:func:`tests.bench.standalone_bench.standalone`),
warms it up with a short chain, then samples the server process and its subprocesses with py-spy
(``pip install py-spy``) while one root and ``--fanout`` parallel ``true`` tasks run. Writes
``<out>.svg`` (flame graph) and ``<out>.txt`` (collapsed stacks), and prints:

* the share of samples by area (the first area, from the innermost frame outwards, that a stack
  touches: SQLAlchemy, subprocess spawn and reap, file churn, gRPC, protobuf, asyncio, ...);
* the functions with the most samples, inclusive (anywhere on the stack) and by self time.

Task processes (``bash``) are not Python and are not sampled; idle threads are not counted.

With ``--singles N`` it profiles N one-task runs started one after another instead; with
``--backfill N`` a backfill of N daily dates of a 5-task chain, PARALLEL 8
(``tests/bench/backfill_bench.py``).

Usage: ``python -m tests.bench.profile [--fanout N | --singles N | --backfill N] [--slots N]
[--out PREFIX] [--rate HZ]``
from the repository root.
"""

from __future__ import annotations

import argparse
import collections
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from dsched import Client
from tests.bench import backfill_bench
from tests.bench.common import default_slots, run_chain, run_fanout, run_singles
from tests.bench.standalone_bench import standalone

# (area, substrings of a frame "function (file:line)"); the first area found walking a stack
# from its innermost frame outwards takes the sample.
AREAS: Sequence[tuple[str, Sequence[str]]] = (
    (
        "file churn (logs, outbox, work dirs, pgids)",
        (
            "dsched_worker/logs.py",
            "outbox.py",
            "workdirs.py",
            "orphans.py",
            "record_log.py",
            "pathlib",
        ),
    ),
    ("subprocess spawn and reap", ("subprocess", "_posixsubprocess", "pidfd", "process.py")),
    ("SQLAlchemy", ("sqlalchemy/", "sqlite3")),
    ("protobuf", ("google/protobuf", "convert.py", "wire.py", "codec.py")),
    ("gRPC", ("grpc/",)),
    ("logging", ("logging/",)),
    ("asyncio", ("asyncio/",)),
)
OTHER = "other (dsched code and the rest)"


def py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(found).exists():
        raise SystemExit("py-spy not found: pip install py-spy")
    return found


def record(pid: int, out: Path, fmt: str, rate: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            *(py_spy(), "record", "--pid", str(pid), "--subprocesses", "--nonblocking"),
            *("--rate", str(rate), "--format", fmt, "--output", str(out)),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
    _, err = proc.communicate(timeout=60)
    if proc.returncode not in (0, -signal.SIGINT):
        print(err.decode(errors="replace"), file=sys.stderr)


def parse(lines: Iterable[str]) -> list[tuple[list[str], int]]:
    """Collapsed stacks (``outer;...;inner count``) as (frames, samples)."""
    stacks = []
    for line in lines:
        frames, _, count = line.rstrip("\n").rpartition(" ")
        if frames and count.isdigit():
            stacks.append((frames.split(";"), int(count)))
    return stacks


def area(frames: Sequence[str]) -> str:
    for frame in reversed(frames):
        for name, needles in AREAS:
            if any(n in frame for n in needles):
                return name
    return OTHER


def table(title: str, counts: collections.Counter[str], total: int, top: int) -> None:
    print(f"\n{title}")
    for name, n in counts.most_common(top):
        print(f"{100 * n / total:6.1f} %  {name}")


# Frames whose code serves master and worker alike (the processes' start, gRPC plumbing): the next
# dsched frame in from them (the coroutine or callback the loop runs) says whose work it is.
_NEUTRAL = (
    "dsched_server/lifecycle.py",
    "dsched_server/standalone.py",
    "dsched_server/child_worker.py",
    "dsched_worker/main.py",
    "dsched_server/rpc/",
)
SHARED = "neither (event loop, gRPC core, threads)"


def side(frames: Sequence[str]) -> str:
    """Whose work a sample is: the outermost dsched frame of the stack (the coroutine or thread
    it runs in) is the master's (``dsched_server``) or the worker's (``dsched_worker``), whichever
    process it runs in; the worker calling shared server code (the protocol) stays the worker's."""
    for frame in frames:
        if any(n in frame for n in _NEUTRAL):
            continue
        if "dsched_worker/" in frame:
            return "worker"
        if "dsched_server/" in frame:
            return "master"
    return SHARED


def summarize(stacks: list[tuple[list[str], int]], top: int) -> None:
    total = sum(n for _, n in stacks) or 1
    areas: collections.Counter[str] = collections.Counter()
    sides: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    for frames, n in stacks:
        areas[area(frames)] += n
        sides[side(frames)] += n
        own[frames[-1]] += n
        # A recursive function counts once per sample; the process frame is not a function.
        for frame in set(frames[1:] if frames[0].startswith("process ") else frames):
            inclusive[frame] += n
    print(f"{total} samples")
    table("by side (the master's code or the worker's)", sides, total, 3)
    table("by area", areas, total, len(AREAS) + 1)
    table("inclusive", inclusive, total, top)
    table("self", own, total, top)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fanout", type=int, default=1000)
    parser.add_argument(
        "--singles", type=int, default=0, help="profile N one-task runs instead of the fan-out"
    )
    parser.add_argument(
        "--backfill", type=int, default=0, help="profile a backfill of N dates instead"
    )
    parser.add_argument("--slots", type=int, default=default_slots())
    parser.add_argument("--out", default="profile", help="output prefix (.svg, .txt)")
    parser.add_argument("--rate", type=int, default=200, help="samples per second")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--worker", default=None, help="the standalone's --worker")
    args = parser.parse_args()
    svg, raw = Path(f"{args.out}.svg"), Path(f"{args.out}.txt")
    with (
        standalone(args.slots, worker=args.worker) as (address, pids),
        Client.connect(address) as client,
    ):
        pid = pids[0]  # py-spy follows its subprocesses: the worker process, if any
        client.ensure_project("bench")
        run_chain(client, 20)  # warm-up, not profiled
        spies = [record(pid, svg, "flamegraph", args.rate), record(pid, raw, "raw", args.rate)]
        try:
            if args.backfill:
                took = backfill_bench.run_backfill(client, args.backfill, backfill_bench.PARALLEL)
                what = f"backfill of {args.backfill} dates: {took:.1f} s"
            elif args.singles:
                singles = run_singles(client, args.singles, pids)
                what = f"{args.singles} one-task runs: {singles.runs_per_second:.0f} runs/s"
            else:
                fanout = run_fanout(client, args.fanout, pids)
                what = f"fan-out of {args.fanout}: {fanout.throughput:.0f} tasks/s"
        finally:
            for spy in spies:
                stop(spy)
    print(f"{what}; flame graph {svg}")
    summarize(parse(raw.read_text().splitlines()), args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
