"""The two task ledgers of the fault-injection tests (a raw one and a fenced one).

*Raw ledger*: every run of a task appends a ``start`` line, works (sleeps), then appends an ``end``
line to one file::

    <task instance id> <attempt> <worker epoch> <worker address> <pid> start|end|term \
<epoch secs> <workflow instance id> <task name>

The lines are far shorter than PIPE_BUF and written with O_APPEND (``>>``), so concurrent tasks
never interleave them. A run killed with SIGTERM (a worker fencing itself, a stop) writes ``term``
from its trap instead of ``end``; a SIGKILLed run writes nothing, and the checker takes its death
time from the harness. Raw duplicates (two runs of one logical task) are allowed and counted: they
measure the at-least-once window.

*Fenced ledger*: just before its ``end`` line the task performs its "effect" with psql, an INSERT
into ``chaos_effects`` that succeeds only while its own task instance row still says that this
attempt of this worker epoch is RUNNING: a fencing-aware sink. Every try also lands in
``chaos_tries`` with whether it was accepted. More than one accepted effect per logical task
(workflow instance, task name) is a fencing failure.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

# ``$$`` is the task's shell: the leader of the task's own process group (the worker starts each
# task in a new session), so it names the whole run.
_RECORD = (
    'rec() {{ printf \'%s %s %s %s %s %s %s %s %s\\n\' "$TI" "$A" "$E" '
    '"${{DSCHED_WORKER_ADDRESS:-unknown}}" "$$" "$1" "$(date +%s.%N)" '
    '"$DSCHED_WORKFLOW_INSTANCE_ID" "$DSCHED_TASK_NAME" >> {ledger}; }}'
)

_EFFECT_SQL = (
    "WITH ok AS (SELECT EXISTS (SELECT 1 FROM task_instances WHERE id = $TI AND attempt = $A"
    " AND worker_epoch = $E AND state = 'RUNNING') AS v),"
    " ins AS (INSERT INTO chaos_effects (ti, attempt, epoch) SELECT $TI, $A, $E FROM ok WHERE v"
    " RETURNING 1)"
    " INSERT INTO chaos_tries (ti, attempt, epoch, accepted) SELECT $TI, $A, $E, v FROM ok"
)


_KINDS: dict[str, Literal["start", "end", "term"]] = {
    "start": "start",
    "end": "end",
    "term": "term",
}


@dataclass(frozen=True, slots=True)
class LedgerLine:
    ti: int
    attempt: int
    epoch: int
    address: str
    pid: int
    kind: Literal["start", "end", "term"]
    at: float  # wall clock (date +%s.%N) of this host
    wi: int
    task: str

    @property
    def logical(self) -> tuple[int, str]:
        """The logical task: one per (workflow instance, task name), whatever the attempt."""
        return (self.wi, self.task)

    @property
    def run(self) -> tuple[int, int, int]:
        """One run: the task's process (pid) of one attempt (ti, attempt)."""
        return (self.ti, self.attempt, self.pid)


class TaskLedger:
    """The raw ledger file and the shell that writes both ledgers."""

    def __init__(self, path: Path, db_url: str, psql_errors: Path) -> None:
        self.path = path
        self.db_url = db_url  # libpq form: postgresql://user@host:port/db
        self.psql_errors = psql_errors

    def script(self, seconds: float, *, effect: bool = True) -> str:
        """A task body: start line, ``sleep seconds``, the fenced effect, end line."""
        ledger = shlex.quote(str(self.path))
        lines = [
            "TI=$DSCHED_TASK_INSTANCE_ID; A=$DSCHED_ATTEMPT; E=${DSCHED_WORKER_EPOCH:-0}",
            _RECORD.format(ledger=ledger),
            # A SIGTERM to the group ends the sleep too; the trap then records when the run died.
            "trap 'rec term; exit 143' TERM",
            "rec start",
            f"sleep {seconds}",
        ]
        if effect:
            lines.append(
                f"psql {shlex.quote(self.db_url)} -qAtX -v ON_ERROR_STOP=1 "
                f'-c "{_EFFECT_SQL}" >/dev/null 2>>{shlex.quote(str(self.psql_errors))}'
            )
        lines.append("rec end")
        return "\n".join(lines) + "\n"

    def lines(self) -> list[LedgerLine]:
        if not self.path.exists():
            return []
        out = []
        for raw in self.path.read_text().splitlines():
            f = raw.split()
            if len(f) != 9 or f[5] not in _KINDS:
                raise AssertionError(f"malformed ledger line {raw!r}")
            kind = _KINDS[f[5]]
            out.append(
                LedgerLine(
                    int(f[0]),
                    int(f[1]),
                    int(f[2]),
                    f[3],
                    int(f[4]),
                    kind,
                    float(f[6]),
                    int(f[7]),
                    f[8],
                )
            )
        return out

    def psql_error_text(self) -> str:
        return self.psql_errors.read_text() if self.psql_errors.exists() else ""
