"""The store reads of a DEPENDENT attempt's check: each item's runs over the window its periods
span (judged by ``core/dependent.py``)."""

from __future__ import annotations

from collections.abc import Sequence

from dsched.dependency import DependencyItem
from dsched_server.core.dependent import Candidate, windows
from dsched_server.engine.effects import DependencyQuery
from dsched_server.store import dependencies
from dsched_server.store.database import Conn


async def read(
    conn: Conn, query: DependencyQuery
) -> dict[DependencyItem, Sequence[Candidate] | None]:
    """Each distinct item's runs; None for an item whose workflow does not exist."""
    found: dict[DependencyItem, Sequence[Candidate] | None] = {}
    codes: dict[tuple[str, str], int | None] = {}
    for group in query.spec.groups:
        for item in group.items:
            if item in found:
                continue
            target = (item.project, item.workflow)
            if target not in codes:
                codes[target] = await dependencies.workflow_id(conn, *target)
            code = codes[target]
            if code is None:
                found[item] = None
                continue
            periods = windows(item.cycle, item.date_value, query.schedule_time, query.zone)
            found[item] = await dependencies.runs_between(
                conn, code, item.task, periods[0].start, periods[-1].end
            )
    return found
