"""What a master tells a worker to run: one attempt of one task."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from dsched.http_spec import HttpSpec
from dsched.options import TimeoutStrategy
from dsched.python_spec import PythonSpec
from dsched.spark import SparkSpec
from dsched.spec import ShellSpec
from dsched.sql import ProcedureSpec, SqlSpec
from dsched_server.core.datasource import Connection
from dsched_server.protocol.attempt import AttemptKey

# The kinds a worker runs (a DEPENDENT task is evaluated on the master).
WorkerKind = ShellSpec | PythonSpec | SparkSpec | HttpSpec | SqlSpec | ProcedureSpec
WORKER_KINDS = (ShellSpec, PythonSpec, SparkSpec, HttpSpec, SqlSpec, ProcedureSpec)
DATASOURCE_KINDS = (SqlSpec, ProcedureSpec)  # the kinds that run against a datasource


def datasource_of(kind: WorkerKind) -> str:
    """The name of the datasource ``kind`` runs against ("" if none)."""
    return kind.datasource if isinstance(kind, DATASOURCE_KINDS) else ""


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskExecution:
    """Everything a worker needs to run one attempt (the wire's ``TaskExecution``).

    ``params`` are exported to the task's environment as they are; ``timeout`` of zero means none.
    ``owner_address``/``owner_epoch`` name the master that receives the attempt's events.
    ``worker_address``/``worker_epoch`` never travel: the worker stamps the incarnation that
    accepted the attempt (exported to the task as its fencing token).
    ``earlier_application_ids``: Spark applications of earlier attempts of the task lost with
    their worker, which the worker kills before it submits (ARCHITECTURE.md §4).
    """

    task_instance_id: int
    attempt: int
    workflow_instance_id: int
    workflow_code: int
    workflow_version: int
    task_name: str
    idempotency_key: str
    kind: WorkerKind
    owner_address: str
    owner_epoch: int
    submit_time: datetime
    params: Mapping[str, str] = field(default_factory=dict)
    timeout: timedelta = timedelta(0)
    timeout_strategy: TimeoutStrategy = TimeoutStrategy.FAIL
    dry_run: bool = False
    queue_rank: int = 0  # where it waits for a slot on a full worker: lower first
    earlier_application_ids: tuple[str, ...] = ()
    worker_address: str = ""
    worker_epoch: int = 0
    # SQL and PROCEDURE: the datasource, resolved by the master at dispatch (its password a
    # Secret, which no repr shows); None until then and for other kinds.
    datasource: Connection | None = None

    @property
    def key(self) -> AttemptKey:
        return AttemptKey(self.task_instance_id, self.attempt)

    @property
    def kills_at_timeout(self) -> bool:
        """True if the worker kills the attempt at its deadline (WARN alone is the master's)."""
        return self.timeout > timedelta(0) and self.timeout_strategy.kills

    def with_owner(self, address: str, epoch: int) -> TaskExecution:
        """The same attempt, owned by another master (after a take-over)."""
        return replace(self, owner_address=address, owner_epoch=epoch)

    def accepted_by(self, address: str, epoch: int) -> TaskExecution:
        """The same attempt, stamped with the worker incarnation that accepted it."""
        return replace(self, worker_address=address, worker_epoch=epoch)
