"""Rows as an aligned text table for a task's log, capped so that a large result does not flood
it (the rows themselves are bounded by the task's row limit)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime, time
from typing import Any

MAX_ROWS_SHOWN = 100
MAX_CELL = 60


def text_of(value: Any) -> str:
    """A value as an OUT parameter or a cell holds it: NULL is "", dates are ISO 8601, bytes hex."""
    if value is None:
        return ""
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    return str(value)


def _cell(value: Any) -> str:
    text = "NULL" if value is None else text_of(value)
    text = text.replace("\r", "\\r").replace("\n", "\\n").replace("\t", "\\t")
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def format_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """``columns`` and the first :data:`MAX_ROWS_SHOWN` ``rows`` as lines of aligned cells."""
    shown = [[_cell(v) for v in row] for row in rows[:MAX_ROWS_SHOWN]]
    header = [_cell(c) for c in columns]
    widths = [len(h) for h in header]
    for row in shown:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    lines = [line(header), "-+-".join("-" * w for w in widths)]
    lines.extend(line(row) for row in shown)
    if len(rows) > MAX_ROWS_SHOWN:
        lines.append(f"... {len(rows) - MAX_ROWS_SHOWN} more row(s) not shown")
    return "\n".join(lines)
