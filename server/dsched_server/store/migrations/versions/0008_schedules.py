"""schedules

Schedules of workflows, and one row per fire time a master fired (or skipped, or queued):
(schedule, fire time) is unique, and the fire row is written in the same transaction as the
instance and the command it starts, so a fire time starts one run whichever master fires it. An
instance names the schedule that started it.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-28 17:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import dsched_server.store.types

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_TIME = dsched_server.store.types.UtcDateTime


def upgrade() -> None:
    op.create_table(
        "schedules",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("project_id", _ID, nullable=False),
        sa.Column("workflow_id", _ID, nullable=False),
        sa.Column("cron", sa.String(length=256), nullable=False),
        sa.Column("time_zone", sa.String(length=64), nullable=False),
        sa.Column("start_time", _TIME(), nullable=True),
        sa.Column("end_time", _TIME(), nullable=True),
        sa.Column("online", sa.Boolean(), nullable=False),
        sa.Column("catch_up", sa.String(length=32), nullable=False),
        sa.Column("catch_up_cap", sa.Integer(), nullable=False),
        sa.Column("overlap", sa.String(length=32), nullable=False),
        sa.Column("options", sa.JSON(), nullable=False),
        sa.Column("next_fire_time", _TIME(), nullable=True),
        sa.Column("last_fire_time", _TIME(), nullable=True),
        sa.Column("create_time", _TIME(), nullable=False),
        sa.Column("update_time", _TIME(), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"], ["projects.id"], name=op.f("fk_schedules_project_id_projects")
        ),
        sa.ForeignKeyConstraint(
            ["workflow_id"], ["workflows.id"], name=op.f("fk_schedules_workflow_id_workflows")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_schedules")),
        sqlite_autoincrement=True,
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_bin",
    )
    op.create_index("ix_schedules_workflow", "schedules", ["workflow_id", "id"], unique=False)
    op.create_index("ix_schedules_project", "schedules", ["project_id", "id"], unique=False)
    op.create_index("ix_schedules_online", "schedules", ["online", "id"], unique=False)
    op.create_index("ix_schedules_update_time", "schedules", ["update_time", "id"], unique=False)
    op.create_table(
        "schedule_fires",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("schedule_id", _ID, nullable=False),
        sa.Column("fire_time", _TIME(), nullable=False),
        sa.Column("state", sa.String(length=32), nullable=False),
        sa.Column("workflow_instance_id", sa.BigInteger(), nullable=True),
        sa.Column("create_time", _TIME(), nullable=False),
        sa.ForeignKeyConstraint(
            ["schedule_id"],
            ["schedules.id"],
            name=op.f("fk_schedule_fires_schedule_id_schedules"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_schedule_fires")),
        sa.UniqueConstraint("schedule_id", "fire_time", name=op.f("uq_schedule_fires_schedule_id")),
        sqlite_autoincrement=True,
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_bin",
    )
    with op.batch_alter_table("workflow_instances") as batch:
        batch.add_column(sa.Column("schedule_id", sa.BigInteger(), nullable=True))
    op.create_index(
        "ix_schedule_fires_state",
        "schedule_fires",
        ["schedule_id", "state", "fire_time"],
        unique=False,
    )


def downgrade() -> None:
    with op.batch_alter_table("workflow_instances") as batch:
        batch.drop_column("schedule_id")
    op.drop_index("ix_schedule_fires_state", table_name="schedule_fires")
    op.drop_table("schedule_fires")
    for name in (
        "ix_schedules_update_time",
        "ix_schedules_online",
        "ix_schedules_project",
        "ix_schedules_workflow",
    ):
        op.drop_index(name, table_name="schedules")
    op.drop_table("schedules")
