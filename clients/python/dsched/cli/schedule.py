"""``dsched schedules`` (list with the next fire time) and ``dsched schedule on|off|preview ID``."""

from __future__ import annotations

import argparse
import sys

from dsched.cli import format as fmt
from dsched.client import Client


def add_parsers(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: list[argparse.ArgumentParser]
) -> None:
    p = sub.add_parser("schedules", parents=common, help="list schedules and their next fire")
    p.add_argument("--workflow", metavar="W")
    p.set_defaults(handler=schedules)

    p = sub.add_parser("schedule", parents=common, help="put a schedule on or off, or preview it")
    p.add_argument("action", choices=("on", "off", "preview"))
    p.add_argument("id", type=int, metavar="ID")
    p.add_argument("--count", type=int, default=10, metavar="N", help="preview: fire times (10)")
    p.set_defaults(handler=schedule)


def schedules(args: argparse.Namespace, client: Client) -> int:
    rows = [
        (
            s.id,
            f"{s.project}/{s.workflow}",
            s.cron,
            s.time_zone,
            "on" if s.online else "off",
            fmt.when(s.next_fire_time),
            fmt.when(s.last_fire_time),
        )
        for s in client.list_schedules(project=args.project, workflow=args.workflow or "")
    ]
    _print(fmt.table(("id", "workflow", "cron", "zone", "state", "next fire", "last fire"), rows))
    return 0


def schedule(args: argparse.Namespace, client: Client) -> int:
    if args.action == "preview":
        for when in client.preview_schedule(args.id, count=args.count):
            _print(fmt.when(when))
        return 0
    info = client.set_schedule_online(args.id, args.action == "on")
    state = "on" if info.online else "off"
    _print(
        f"schedule {info.id}  {info.project}/{info.workflow}  {state}  next fire "
        f"{fmt.when(info.next_fire_time)}"
    )
    return 0


def _print(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
