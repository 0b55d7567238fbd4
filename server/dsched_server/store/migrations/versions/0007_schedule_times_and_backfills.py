"""schedule times and backfills

Every instance carries the schedule time its time parameters and date windows count from (for the
runs already stored, the submit time they counted from), the time zone they count in, and what
started it (a client, a schedule, a backfill). Backfills are stored
with one row per date; (backfill, schedule time) is unique, so a date cannot get two rows, and a
date row names the one instance that runs it. The backfill row keeps its dates' counts by state
(written with them), so a listing reads no date row.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-28 16:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import dsched_server.store.types

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_TIME = dsched_server.store.types.UtcDateTime


def upgrade() -> None:
    with op.batch_alter_table("workflow_instances") as batch:
        batch.add_column(sa.Column("schedule_time", _TIME(), nullable=True))
        batch.add_column(
            sa.Column("time_zone", sa.String(length=64), nullable=False, server_default="UTC")
        )
        batch.add_column(
            sa.Column("trigger", sa.String(length=32), nullable=False, server_default="MANUAL")
        )
        batch.add_column(sa.Column("backfill_id", sa.BigInteger(), nullable=True))
    # Runs from before: their time parameters counted from when they were submitted, in UTC.
    op.execute("UPDATE workflow_instances SET schedule_time = submit_time")
    op.create_index(
        "ix_workflow_instances_schedule_time",
        "workflow_instances",
        ["schedule_time", "workflow_id"],
        unique=False,
    )
    op.create_table(
        "backfills",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("project_id", _ID, nullable=False),
        sa.Column("workflow_id", _ID, nullable=False),
        sa.Column("state", sa.String(length=32), nullable=False),
        sa.Column("cron", sa.String(length=256), nullable=False),
        sa.Column("time_zone", sa.String(length=64), nullable=False),
        sa.Column("run_order", sa.String(length=32), nullable=False),
        sa.Column("parallelism", sa.Integer(), nullable=False),
        sa.Column("reprocess", sa.String(length=32), nullable=False),
        sa.Column("on_failure", sa.String(length=32), nullable=False),
        sa.Column("options", sa.JSON(), nullable=False),
        sa.Column("succeeded", sa.Integer(), nullable=False),
        sa.Column("running", sa.Integer(), nullable=False),
        sa.Column("failed", sa.Integer(), nullable=False),
        sa.Column("pending", sa.Integer(), nullable=False),
        sa.Column("skipped", sa.Integer(), nullable=False),
        sa.Column("create_time", _TIME(), nullable=False),
        sa.Column("update_time", _TIME(), nullable=False),
        sa.Column("end_time", _TIME(), nullable=True),
        sa.ForeignKeyConstraint(
            ["project_id"], ["projects.id"], name=op.f("fk_backfills_project_id_projects")
        ),
        sa.ForeignKeyConstraint(
            ["workflow_id"], ["workflows.id"], name=op.f("fk_backfills_workflow_id_workflows")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_backfills")),
        sqlite_autoincrement=True,
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_bin",
    )
    op.create_index("ix_backfills_workflow", "backfills", ["workflow_id", "id"], unique=False)
    op.create_index("ix_backfills_project", "backfills", ["project_id", "id"], unique=False)
    op.create_index("ix_backfills_state", "backfills", ["state", "id"], unique=False)
    op.create_table(
        "backfill_dates",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("backfill_id", _ID, nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("schedule_time", _TIME(), nullable=False),
        sa.Column("state", sa.String(length=32), nullable=False),
        sa.Column("workflow_instance_id", sa.BigInteger(), nullable=True),
        sa.Column("start_time", _TIME(), nullable=True),
        sa.Column("end_time", _TIME(), nullable=True),
        sa.ForeignKeyConstraint(
            ["backfill_id"],
            ["backfills.id"],
            name=op.f("fk_backfill_dates_backfill_id_backfills"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_backfill_dates")),
        sa.UniqueConstraint(
            "backfill_id", "schedule_time", name=op.f("uq_backfill_dates_backfill_id")
        ),
        sqlite_autoincrement=True,
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_bin",
    )
    op.create_index(
        "ix_backfill_dates_state",
        "backfill_dates",
        ["backfill_id", "state", "position"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index("ix_backfill_dates_state", table_name="backfill_dates")
    op.drop_table("backfill_dates")
    for name in ("ix_backfills_state", "ix_backfills_project", "ix_backfills_workflow"):
        op.drop_index(name, table_name="backfills")
    op.drop_table("backfills")
    op.drop_index("ix_workflow_instances_schedule_time", table_name="workflow_instances")
    with op.batch_alter_table("workflow_instances") as batch:
        for column in ("backfill_id", "trigger", "time_zone", "schedule_time"):
            batch.drop_column(column)
