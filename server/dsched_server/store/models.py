"""The metadata schema (SQLAlchemy 2.x declarative models).

Repositories query these tables with Core statements and return
:mod:`dsched_server.core.records`; rows never leave the store package. Unique keys carry the
guarantees of ARCHITECTURE.md §4: one instance per command (a command row references exactly one
instance, and at most one command per instance is pending), one task instance per (workflow
instance, task, attempt). Enum columns hold the permanent
value names of :mod:`dsched.states` and :mod:`dsched.options`. Schema changes go through Alembic
migrations in ``migrations/versions``. On MariaDB every table uses the ``utf8mb4_bin`` collation
(migration 0002), so text compares exactly as on PostgreSQL and SQLite; a new table must say so too
(``mysql_charset="utf8mb4", mysql_collate="utf8mb4_bin"``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar, cast

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from dsched_server.store.types import HexLongBlob, Id, UtcDateTime

NAME = 64
STATE = 32
REASON = 1024
ADDRESS = 255
APPLICATION_ID = 320  # a Kubernetes submission id: namespace (63) ":" pod name (253)
TIME_ZONE = 64  # IANA names are at most about 30 characters

# Deterministic constraint names, so migrations can refer to them on every database.
NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


# SQLite otherwise hands out max(id) + 1, reusing the ids of deleted rows (say, the newest
# instances of a deleted workflow). Ids are remembered outside the database (a worker's
# idempotent dispatch key is the task instance id and attempt), so they must never come back.
_AUTOINCREMENT = {"sqlite_autoincrement": True}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        datetime: UtcDateTime(),
        dict[str, Any]: JSON(),
    }


class Project(Base):
    __tablename__ = "projects"
    __table_args__ = (_AUTOINCREMENT,)
    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(NAME), unique=True)
    description: Mapped[str] = mapped_column(String(1024), default="")
    create_time: Mapped[datetime]
    update_time: Mapped[datetime]


class Workflow(Base):
    """The head of a versioned workflow definition; its id is the workflow's stable code."""

    __tablename__ = "workflows"
    __table_args__ = (UniqueConstraint("project_id", "name"), _AUTOINCREMENT)
    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id"))
    name: Mapped[str] = mapped_column(String(NAME))
    current_version: Mapped[int] = mapped_column(Integer)
    release_state: Mapped[str] = mapped_column(String(STATE))
    create_time: Mapped[datetime]
    update_time: Mapped[datetime]


class WorkflowVersion(Base):
    __tablename__ = "workflow_versions"
    __table_args__ = (UniqueConstraint("workflow_id", "version"), _AUTOINCREMENT)
    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    workflow_id: Mapped[int] = mapped_column(ForeignKey("workflows.id", ondelete="CASCADE"))
    version: Mapped[int] = mapped_column(Integer)
    description: Mapped[str] = mapped_column(Text, default="")
    params: Mapped[dict[str, Any]]
    create_time: Mapped[datetime]


class TaskDefinition(Base):
    """One task of one workflow version; ``spec`` holds its settings, edges live in task_edges."""

    __tablename__ = "task_definitions"
    __table_args__ = (UniqueConstraint("workflow_id", "version", "name"), _AUTOINCREMENT)
    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    workflow_id: Mapped[int] = mapped_column(ForeignKey("workflows.id", ondelete="CASCADE"))
    version: Mapped[int] = mapped_column(Integer)
    position: Mapped[int] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(String(NAME))
    task_type: Mapped[str] = mapped_column(String(STATE))
    spec: Mapped[dict[str, Any]]


class TaskEdge(Base):
    __tablename__ = "task_edges"
    __table_args__ = (
        UniqueConstraint("workflow_id", "version", "upstream", "downstream"),
        _AUTOINCREMENT,
    )
    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    workflow_id: Mapped[int] = mapped_column(ForeignKey("workflows.id", ondelete="CASCADE"))
    version: Mapped[int] = mapped_column(Integer)
    upstream: Mapped[str] = mapped_column(String(NAME))
    downstream: Mapped[str] = mapped_column(String(NAME))


class WorkflowInstance(Base):
    __tablename__ = "workflow_instances"
    __table_args__ = (
        # Each listing filter with the id after it, so a page is a short walk in id order
        # (store.instances.list_instances; migration 0006).
        Index("ix_workflow_instances_state", "state", "id"),
        Index("ix_workflow_instances_workflow", "workflow_id", "id"),
        Index("ix_workflow_instances_project", "project_id", "id"),
        Index("ix_workflow_instances_submit_time", "submit_time", "id"),
        Index("ix_workflow_instances_owner", "host", "epoch"),
        Index("ix_workflow_instances_end_time", "end_time", "id"),  # retention's walk
        # A workflow's runs by schedule time: DEPENDENT windows, backfill reprocessing (0007).
        Index("ix_workflow_instances_schedule_time", "schedule_time", "workflow_id"),
        _AUTOINCREMENT,
    )
    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id"))
    workflow_id: Mapped[int] = mapped_column(ForeignKey("workflows.id"))
    workflow_version: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(STATE))
    command_type: Mapped[str] = mapped_column(String(STATE))
    options: Mapped[dict[str, Any]]
    run_scope: Mapped[dict[str, Any]]
    host: Mapped[str] = mapped_column(String(ADDRESS), default="")
    epoch: Mapped[int] = mapped_column(BigInteger, default=0)
    run_times: Mapped[int] = mapped_column(Integer, default=1)
    submit_time: Mapped[datetime]
    start_time: Mapped[datetime | None]
    end_time: Mapped[datetime | None]
    state_reason: Mapped[str] = mapped_column(String(REASON), default="")
    var_pool: Mapped[dict[str, Any]]
    # What time parameters and DEPENDENT windows count from (null: a run from before 0007, whose
    # submit time stands in), the zone they count in, what started the run, and its backfill.
    schedule_time: Mapped[datetime | None]
    time_zone: Mapped[str] = mapped_column(String(TIME_ZONE), server_default="UTC")
    trigger: Mapped[str] = mapped_column(String(STATE), server_default="MANUAL")
    backfill_id: Mapped[int | None] = mapped_column(BigInteger)
    schedule_id: Mapped[int | None] = mapped_column(BigInteger)  # the schedule that fired it


class Command(Base):
    """A pending request for a master to (re)start driving an instance. Claimed by deleting it."""

    __tablename__ = "commands"
    __table_args__ = (Index("ix_commands_priority", "priority_rank", "id"), _AUTOINCREMENT)
    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    type: Mapped[str] = mapped_column(String(STATE))
    workflow_instance_id: Mapped[int] = mapped_column(
        ForeignKey("workflow_instances.id", ondelete="CASCADE"), unique=True
    )
    priority_rank: Mapped[int] = mapped_column(Integer)
    scope: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    create_time: Mapped[datetime]


class ControlRequest(Base):
    """A user's pause or stop of an instance, recorded by whichever master received it and applied
    by the instance's owner (ARCHITECTURE.md §4). ``request_id`` makes the request idempotent;
    ``outcome`` is PENDING until the owner applies it (APPLIED) or finds it illegal (REJECTED)."""

    __tablename__ = "control_requests"
    __table_args__ = (
        Index("ix_control_requests_instance", "workflow_instance_id", "outcome"),
        Index("ix_control_requests_outcome", "outcome", "workflow_instance_id"),
        {**_AUTOINCREMENT, "mysql_charset": "utf8mb4", "mysql_collate": "utf8mb4_bin"},
    )
    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    request_id: Mapped[str] = mapped_column(String(128), unique=True)
    workflow_instance_id: Mapped[int] = mapped_column(
        ForeignKey("workflow_instances.id", ondelete="CASCADE")
    )
    kind: Mapped[str] = mapped_column(String(STATE))
    requested_by: Mapped[str] = mapped_column(String(ADDRESS))
    create_time: Mapped[datetime]
    outcome: Mapped[str] = mapped_column(String(STATE))
    # The instance's state once the control was applied (or found illegal), and why it was refused.
    outcome_state: Mapped[str | None] = mapped_column(String(STATE), nullable=True)
    outcome_reason: Mapped[str] = mapped_column(String(REASON), default="")
    # The master epoch that applied or refused it, and when.
    applied_by: Mapped[int] = mapped_column(BigInteger, default=0)
    apply_time: Mapped[datetime | None]


class TaskInstance(Base):
    __tablename__ = "task_instances"
    __table_args__ = (
        UniqueConstraint("workflow_instance_id", "task_name", "attempt"),
        # Both end in the id: ListTaskInstances pages in id order, with or without superseded ones.
        Index("ix_task_instances_instance_valid", "workflow_instance_id", "valid", "id"),
        Index("ix_task_instances_instance", "workflow_instance_id", "id"),
        Index("ix_task_instances_worker", "host", "worker_epoch", "state"),
        _AUTOINCREMENT,
    )
    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    workflow_instance_id: Mapped[int] = mapped_column(
        ForeignKey("workflow_instances.id", ondelete="CASCADE")
    )
    task_name: Mapped[str] = mapped_column(String(NAME))
    attempt: Mapped[int] = mapped_column(Integer)
    retry_times: Mapped[int] = mapped_column(Integer, default=0)
    state: Mapped[str] = mapped_column(String(STATE))
    valid: Mapped[bool] = mapped_column(Boolean, default=True)
    host: Mapped[str] = mapped_column(String(ADDRESS), default="")
    worker_epoch: Mapped[int] = mapped_column(BigInteger, default=0)
    pid: Mapped[int] = mapped_column(Integer, default=0)
    log_path: Mapped[str] = mapped_column(String(REASON), default="")
    exit_code: Mapped[int | None]
    submit_time: Mapped[datetime]
    start_time: Mapped[datetime | None]
    end_time: Mapped[datetime | None]
    out_params: Mapped[dict[str, Any]]
    priority: Mapped[str] = mapped_column(String(STATE))
    worker_group: Mapped[str] = mapped_column(String(NAME))
    state_reason: Mapped[str] = mapped_column(String(REASON), default="")
    # The Spark application id of a SPARK attempt (migration 0009).
    application_id: Mapped[str] = mapped_column(String(APPLICATION_ID), server_default="")


class InstanceEvent(Base):
    """Append-only log of every state transition; ``sequence`` is the watch cursor."""

    __tablename__ = "instance_events"
    __table_args__ = (
        Index("ix_instance_events_instance", "workflow_instance_id", "sequence"),
        _AUTOINCREMENT,
    )
    sequence: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    workflow_instance_id: Mapped[int] = mapped_column(
        ForeignKey("workflow_instances.id", ondelete="CASCADE")
    )
    task_instance_id: Mapped[int] = mapped_column(BigInteger, default=0)
    task_name: Mapped[str] = mapped_column(String(NAME), default="")
    workflow_state: Mapped[str | None] = mapped_column(String(STATE), nullable=True)
    task_state: Mapped[str | None] = mapped_column(String(STATE), nullable=True)
    kind: Mapped[str] = mapped_column(String(STATE))
    message: Mapped[str] = mapped_column(String(REASON), default="")
    create_time: Mapped[datetime]


class Server(Base):
    """One row per server incarnation; the auto-increment id is the incarnation's epoch."""

    __tablename__ = "servers"
    __table_args__ = (_AUTOINCREMENT,)
    epoch: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    role: Mapped[str] = mapped_column(String(STATE))
    address: Mapped[str] = mapped_column(String(ADDRESS))
    start_time: Mapped[datetime]


class RequestLog(Base):
    """Answers to mutating RPCs by request_id, written in the same transaction as the change."""

    __tablename__ = "request_log"
    __table_args__ = (Index("ix_request_log_create_time", "create_time"),)  # retention's walk
    request_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    method: Mapped[str] = mapped_column(String(NAME))
    # LONGBLOB on MariaDB: a plain BLOB stops at 64 KiB and a big workflow's answer is larger.
    response: Mapped[bytes] = mapped_column(
        LargeBinary().with_variant(HexLongBlob(), "mysql", "mariadb")
    )
    create_time: Mapped[datetime]
    # SHA-256 (hex) of the request without its request_id; NULL for rows older than revision 0004.
    fingerprint: Mapped[str | None] = mapped_column(String(64))


def table(model: type[Base]) -> Table:
    """The Core table of a model (typed as a Table, which ``__table__`` is not to type checkers)."""
    return cast(Table, model.__table__)


class Backfill(Base):
    """A backfill: its request and state; its dates are :class:`BackfillDate` rows."""

    __tablename__ = "backfills"
    __table_args__ = (
        Index("ix_backfills_workflow", "workflow_id", "id"),
        Index("ix_backfills_project", "project_id", "id"),
        Index("ix_backfills_state", "state", "id"),
        {**_AUTOINCREMENT, "mysql_charset": "utf8mb4", "mysql_collate": "utf8mb4_bin"},
    )
    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id"))
    workflow_id: Mapped[int] = mapped_column(ForeignKey("workflows.id"))
    state: Mapped[str] = mapped_column(String(STATE))
    cron: Mapped[str] = mapped_column(String(256))
    time_zone: Mapped[str] = mapped_column(String(TIME_ZONE))
    run_order: Mapped[str] = mapped_column(String(STATE))
    parallelism: Mapped[int] = mapped_column(Integer)
    reprocess: Mapped[str] = mapped_column(String(STATE))
    on_failure: Mapped[str] = mapped_column(String(STATE))
    options: Mapped[dict[str, Any]]  # codec.options_to_json's document: every run's options
    # Its dates by state, written with them (a listing reads no date row).
    succeeded: Mapped[int] = mapped_column(Integer)
    running: Mapped[int] = mapped_column(Integer)
    failed: Mapped[int] = mapped_column(Integer)
    pending: Mapped[int] = mapped_column(Integer)
    skipped: Mapped[int] = mapped_column(Integer)
    create_time: Mapped[datetime]
    update_time: Mapped[datetime]
    end_time: Mapped[datetime | None]


class BackfillDate(Base):
    """One date of a backfill, unique per backfill; ``workflow_instance_id`` is its run."""

    __tablename__ = "backfill_dates"
    __table_args__ = (
        UniqueConstraint("backfill_id", "schedule_time"),
        Index("ix_backfill_dates_state", "backfill_id", "state", "position"),
        {**_AUTOINCREMENT, "mysql_charset": "utf8mb4", "mysql_collate": "utf8mb4_bin"},
    )
    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    backfill_id: Mapped[int] = mapped_column(ForeignKey("backfills.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)
    schedule_time: Mapped[datetime]
    state: Mapped[str] = mapped_column(String(STATE))
    workflow_instance_id: Mapped[int | None] = mapped_column(BigInteger)
    start_time: Mapped[datetime | None]
    end_time: Mapped[datetime | None]


class Schedule(Base):
    """A schedule of a workflow (migration 0008)."""

    __tablename__ = "schedules"
    __table_args__ = (
        Index("ix_schedules_workflow", "workflow_id", "id"),
        Index("ix_schedules_project", "project_id", "id"),
        Index("ix_schedules_online", "online", "id"),  # what a master loads
        Index("ix_schedules_update_time", "update_time", "id"),  # other masters' changes
        {**_AUTOINCREMENT, "mysql_charset": "utf8mb4", "mysql_collate": "utf8mb4_bin"},
    )
    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id"))
    workflow_id: Mapped[int] = mapped_column(ForeignKey("workflows.id"))
    cron: Mapped[str] = mapped_column(String(256))
    time_zone: Mapped[str] = mapped_column(String(TIME_ZONE))
    start_time: Mapped[datetime | None]
    end_time: Mapped[datetime | None]
    online: Mapped[bool] = mapped_column(Boolean)
    catch_up: Mapped[str] = mapped_column(String(STATE))
    catch_up_cap: Mapped[int] = mapped_column(Integer)
    overlap: Mapped[str] = mapped_column(String(STATE))
    options: Mapped[dict[str, Any]]  # codec.options_to_json's document: every run's options
    next_fire_time: Mapped[datetime | None]
    last_fire_time: Mapped[datetime | None]
    create_time: Mapped[datetime]
    update_time: Mapped[datetime]


class ScheduleFire(Base):
    """A fire time of a schedule that a master fired, skipped or queued: unique, and written with
    the run it starts (``workflow_instance_id``), so each fire time starts at most one run."""

    __tablename__ = "schedule_fires"
    __table_args__ = (
        UniqueConstraint("schedule_id", "fire_time"),
        Index("ix_schedule_fires_state", "schedule_id", "state", "fire_time"),
        {**_AUTOINCREMENT, "mysql_charset": "utf8mb4", "mysql_collate": "utf8mb4_bin"},
    )
    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    schedule_id: Mapped[int] = mapped_column(ForeignKey("schedules.id", ondelete="CASCADE"))
    fire_time: Mapped[datetime]
    state: Mapped[str] = mapped_column(String(STATE))
    workflow_instance_id: Mapped[int | None] = mapped_column(BigInteger)
    create_time: Mapped[datetime]


class DatasourceRow(Base):
    """A named database connection (migration 0010). ``password`` is a Fernet token
    (:mod:`dsched_server.datasource_key`), never the password itself; NULL: none set."""

    __tablename__ = "datasources"
    __table_args__ = (
        {**_AUTOINCREMENT, "mysql_charset": "utf8mb4", "mysql_collate": "utf8mb4_bin"},
    )
    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(NAME), unique=True)
    type: Mapped[str] = mapped_column(String(STATE))
    description: Mapped[str] = mapped_column(String(1024))
    host: Mapped[str] = mapped_column(String(255))
    port: Mapped[int] = mapped_column(Integer)
    database: Mapped[str] = mapped_column(String(1024))
    user: Mapped[str] = mapped_column(String(128))
    password: Mapped[str | None] = mapped_column(Text)
    options: Mapped[dict[str, Any]]
    url: Mapped[str] = mapped_column(Text)
    create_time: Mapped[datetime]
    update_time: Mapped[datetime]
