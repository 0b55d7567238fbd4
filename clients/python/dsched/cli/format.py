"""Plain-text rendering for the CLI: aligned tables, times, durations, percentages.

Output is meant for terminals and for ``grep``/``awk``: one row per line, columns separated by at
least two spaces, no colours, times in the local time zone (``-`` where a value is absent).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from dsched.results import TaskInstance, WorkflowInstance

ABSENT = "-"


def table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """Renders rows under upper-case headers, each column as wide as its widest cell (in terminal
    columns, see :func:`width`).

    The last column is not padded, so lines carry no trailing spaces.
    """
    cells = [[h.upper() for h in headers]]
    cells += [[ABSENT if c is None or c == "" else str(c) for c in row] for row in rows]
    widths = [max(width(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for row in cells:
        padded = [cell + " " * (widths[i] - width(cell)) for i, cell in enumerate(row[:-1])]
        lines.append("  ".join([*padded, row[-1]]))
    return "\n".join(lines)


def width(text: str) -> int:
    """Terminal columns ``text`` takes: wide and full-width characters (CJK) two, combining marks
    none, others one (names may be in any script)."""
    total = 0
    for char in text:
        if unicodedata.category(char) in ("Mn", "Me", "Cf"):
            continue
        total += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return total


def when(value: datetime | None) -> str:
    """A timestamp as local ``YYYY-MM-DD HH:MM:SS``."""
    if value is None:
        return ABSENT
    return value.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def clock(value: datetime | None) -> str:
    """A timestamp as local ``HH:MM:SS`` (for event lines, where the day is obvious)."""
    if value is None:
        return datetime.now().strftime("%H:%M:%S")
    return value.astimezone().strftime("%H:%M:%S")


def elapsed(value: timedelta | None) -> str:
    """A duration as ``850ms``, ``12.3s``, ``4m05s`` or ``2h03m``."""
    if value is None:
        return ABSENT
    seconds = value.total_seconds()
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def percent(value: float) -> str:
    """A 0..1 ratio as a whole percentage."""
    return f"{value * 100:.0f}%"


def instance_rows(instances: Iterable[WorkflowInstance]) -> str:
    """The ``dsched instances`` table."""
    rows = (
        (
            i.id,
            f"{i.project}/{i.workflow}",
            i.workflow_version,
            i.state,
            i.trigger,
            when(i.schedule_time),
            when(i.start_time),
            when(i.end_time),
            elapsed(i.duration),
        )
        for i in instances
    )
    headers = ("id", "workflow", "version", "state", "trigger", "scheduled", "start", "end")
    return table((*headers, "duration"), rows)


def instance_header(instance: WorkflowInstance) -> str:
    """The ``key: value`` block at the top of ``dsched show``."""
    fields = [
        ("instance", str(instance.id)),
        ("workflow", f"{instance.project}/{instance.workflow} v{instance.workflow_version}"),
        ("state", str(instance.state)),
        ("command", str(instance.command_type or ABSENT)),
        ("trigger", trigger(instance)),
        ("scheduled", zoned(instance.schedule_time, instance.time_zone)),
        ("submitted", when(instance.submit_time)),
        ("started", when(instance.start_time)),
        ("ended", when(instance.end_time)),
        ("duration", elapsed(instance.duration)),
        ("host", instance.host or ABSENT),
    ]
    if instance.dry_run:
        fields.append(("dry run", "yes"))
    if instance.params:
        fields.append(("params", " ".join(f"{k}={v}" for k, v in sorted(instance.params.items()))))
    if instance.state_reason:
        fields.append(("reason", instance.state_reason))
    return "\n".join(f"{name + ':':<11}{value}" for name, value in fields)


def trigger(instance: WorkflowInstance) -> str:
    """What started the run, with the schedule or backfill it belongs to."""
    if instance.schedule_id is not None:
        return f"{instance.trigger} (schedule {instance.schedule_id})"
    if instance.backfill_id is not None:
        return f"{instance.trigger} (backfill {instance.backfill_id})"
    return str(instance.trigger)


def zoned(value: datetime | None, zone: str) -> str:
    """A schedule time in the zone it is read in (its time parameters count from that wall
    time, so the local time of the terminal would mislead), e.g. ``2026-03-29 02:00:00
    Europe/Berlin``."""
    if value is None:
        return ABSENT
    try:
        tz: tzinfo = ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):  # a zone this client does not know
        tz, zone = UTC, "UTC"
    return f"{value.astimezone(tz).strftime('%Y-%m-%d %H:%M:%S')} {zone}"


def task_rows(tasks: Iterable[TaskInstance], types: Mapping[str, str] | None = None) -> str:
    """The task table of ``dsched show``; superseded attempts are marked with ``*``; the last
    column is a SPARK attempt's Spark application id. ``types``: each task's type by name (a
    column of its own when given)."""
    kinds = types or {}
    rows = (
        (
            t.id,
            t.task_name,
            *((kinds.get(t.task_name, ABSENT),) if types is not None else ()),
            f"{t.attempt}{'' if t.valid else '*'}",
            t.state,
            t.host,
            when(t.start_time),
            elapsed(t.duration),
            ABSENT if t.exit_code is None else t.exit_code,
            t.application_id or ABSENT,
        )
        for t in tasks
    )
    typed = ("type",) if types is not None else ()
    headers = (
        *("id", "task", *typed, "attempt", "state", "host", "start", "duration", "exit code"),
        "application",
    )
    return table(headers, rows)


def task_reasons(tasks: Iterable[TaskInstance]) -> str:
    """The lines under the task table of ``dsched show``: why a task is in its state, for each
    task that says (waiting for a worker, timed out, killed, ...); "" if none does."""
    return "\n".join(f"{t.id} {t.task_name}: {t.state_reason}" for t in tasks if t.state_reason)


MAX_OUT_SHOWN = 200  # characters of OUT parameters per task in ``dsched show``


def task_outputs(tasks: Iterable[TaskInstance]) -> str:
    """The OUT parameters each task set (a SQL task's columns, a ``setValue``), one line per task
    instance that set any, clipped; "" if none did."""
    lines = []
    for t in tasks:
        if not t.out_params:
            continue
        text = ", ".join(f"{k}={v}" for k, v in sorted(t.out_params.items()))
        if len(text) > MAX_OUT_SHOWN:
            text = text[: MAX_OUT_SHOWN - 1] + "…"
        lines.append(f"{t.id} {t.task_name}: {text}")
    return "\n".join(lines)
