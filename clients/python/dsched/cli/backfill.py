"""``dsched backfill`` and ``dsched backfills``: start a backfill and follow it with a progress
bar, list backfills, pause, resume, cancel, and re-attach to one.

Following is a view: Ctrl-C detaches it (the backfill goes on; ``dsched backfill watch ID``
re-attaches) and ``--detach`` does not follow at all.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from dsched.cli import format as fmt
from dsched.cli.commands import parse_params
from dsched.client import Client
from dsched.errors import FieldViolation, InvalidArgument
from dsched.options import BackfillFailure, BackfillOrder, BackfillReprocess
from dsched.results import Backfill, BackfillProgress

CONTROLS = ("pause", "resume", "cancel", "watch")
POLL_S = 0.5  # how often the progress bar looks again (a human's view)
BAR = 30


def add_parsers(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: list[argparse.ArgumentParser]
) -> None:
    p = sub.add_parser(
        "backfill",
        parents=common,
        help="run a workflow for past dates (or: backfill pause|resume|cancel|watch ID)",
    )
    p.add_argument("target", metavar="WORKFLOW|pause|resume|cancel|watch")
    p.add_argument("id", nargs="?", type=int, metavar="ID")
    p.add_argument("--start", metavar="DATE", help="first schedule time (YYYY-MM-DD[THH:MM])")
    p.add_argument("--end", metavar="DATE", help="last schedule time (inclusive)")
    p.add_argument("--dates", metavar="D1,D2,...", help="explicit schedule times instead")
    p.add_argument("--cron", default="", help="the dates of the range (default: daily 00:00)")
    p.add_argument("--tz", default="", metavar="ZONE", help="IANA time zone (default: UTC)")
    p.add_argument("--parallel", type=int, default=1, metavar="N", help="runs at a time (1-32)")
    p.add_argument("--order", choices=("asc", "desc"), default="asc")
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="start parameter of each run",
    )
    which = p.add_mutually_exclusive_group()
    which.add_argument("--failed-only", action="store_true", help="only dates whose run failed")
    which.add_argument("--missing-only", action="store_true", help="only dates never run")
    p.add_argument("--stop-on-failure", action="store_true", help="skip the rest after a failure")
    p.add_argument("--detach", action="store_true", help="start it and return")
    p.set_defaults(handler=backfill)

    p = sub.add_parser("backfills", parents=common, help="list backfills, newest first")
    p.add_argument("--workflow", metavar="W")
    p.add_argument("--limit", type=int, default=20, metavar="N")
    p.set_defaults(handler=backfills)


def backfill(args: argparse.Namespace, client: Client) -> int:
    if args.target in CONTROLS:
        if args.id is None:
            raise InvalidArgument(f"dsched backfill {args.target} needs the backfill's ID")
        if args.target == "watch":
            return follow(client, client.get_backfill(args.id))
        control = {
            "pause": client.pause_backfill,
            "resume": client.resume_backfill,
            "cancel": client.cancel_backfill,
        }[args.target]
        _print(summary(control(args.id)))
        return 0
    zone = _zone(args.tz)
    created = client.create_backfill(
        args.project,
        args.target,
        start=_when(args.start, zone, "--start") if args.start else None,
        end=_when(args.end, zone, "--end") if args.end else None,
        dates=[_when(d, zone, "--dates") for d in args.dates.split(",")] if args.dates else (),
        cron=args.cron,
        time_zone=args.tz,
        parallelism=args.parallel,
        order=BackfillOrder.DESCENDING if args.order == "desc" else BackfillOrder.ASCENDING,
        reprocess=(
            BackfillReprocess.FAILED
            if args.failed_only
            else BackfillReprocess.MISSING
            if args.missing_only
            else BackfillReprocess.ALL
        ),
        on_failure=BackfillFailure.STOP if args.stop_on_failure else BackfillFailure.CONTINUE,
        params=parse_params(args.param),
    )
    _print(
        f"backfill {created.id}  {created.project}/{created.workflow}  {len(created.dates)} dates"
    )
    if args.detach:
        return 0
    return follow(client, created)


def follow(client: Client, current: Backfill) -> int:
    """Redraws the progress line until the backfill ends; 0 if it SUCCEEDED. Ctrl-C detaches."""
    live = sys.stdout.isatty()
    last = ""
    try:
        while True:
            line = bar(current.progress) + f"  {current.state.lower()}"
            if line != last:
                sys.stdout.write(("\r\033[K" if live else "") + line + ("" if live else "\n"))
                sys.stdout.flush()
                last = line
            if current.state.finished:
                break
            time.sleep(POLL_S)
            current = client.get_backfill(current.id)
    except KeyboardInterrupt:
        sys.stdout.write("\n" if live else "")
        _print(f"detached; the backfill goes on: dsched backfill watch {current.id}")
        return 0
    if live:
        sys.stdout.write("\n")
    _print(summary(current))
    return 0 if current.state == "SUCCEEDED" else 1


def bar(p: BackfillProgress, width: int = BAR) -> str:
    """``[#####-----...] 12/50  ok 10  failed 2  running 3  pending 35  ETA 0:01:20``: ``#`` for
    dates that will not run again, ``-`` for running ones."""
    total = max(p.total, 1)
    done = round(width * p.done / total)
    running = min(round(width * p.running / total), width - done)
    cells = "#" * done + "-" * running + "." * (width - done - running)
    parts = [
        f"[{cells}] {p.done}/{p.total}",
        f"ok {p.succeeded}",
        f"failed {p.failed}",
        f"running {p.running}",
        f"pending {p.pending}",
    ]
    if p.skipped:
        parts.append(f"skipped {p.skipped}")
    if p.eta is not None and (p.pending or p.running):
        parts.append(f"ETA {timedelta(seconds=round(p.eta.total_seconds()))}")
    return "  ".join(parts)


def summary(b: Backfill) -> str:
    p = b.progress
    return (
        f"backfill {b.id}  {b.project}/{b.workflow}  {b.state}  "
        f"{p.succeeded} succeeded, {p.failed} failed, {p.skipped} skipped of {p.total}"
    )


def backfills(args: argparse.Namespace, client: Client) -> int:
    rows: list[tuple[object, ...]] = []
    for b in client.list_backfills(project=args.project, workflow=args.workflow or ""):
        if len(rows) == args.limit:
            break
        p = b.progress
        rows.append(
            (
                b.id,
                f"{b.project}/{b.workflow}",
                b.state,
                f"{p.done}/{p.total}",
                p.failed,
                p.running,
                b.parallelism,
                fmt.when(b.create_time),
            )
        )
    _print(
        fmt.table(
            ("id", "workflow", "state", "done", "failed", "running", "parallel", "created"), rows
        )
    )
    return 0


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidArgument(
            f"unknown time zone {name!r}", violations=[FieldViolation("--tz", "unknown")]
        ) from None


def _when(text: str, zone: ZoneInfo, option: str) -> datetime:
    """``YYYY-MM-DD`` (midnight) or an ISO date and time, in ``zone`` unless it has an offset."""
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidArgument(
            f"{option} expects YYYY-MM-DD or YYYY-MM-DDTHH:MM, got {text!r}",
            violations=[FieldViolation(option, "not a date")],
        ) from None
    return value.replace(tzinfo=zone) if value.tzinfo is None else value.astimezone(UTC)


def _print(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
