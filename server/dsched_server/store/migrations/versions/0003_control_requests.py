"""control requests

Pause and stop requests recorded by any master for the instance's owner to apply (ARCHITECTURE.md
§4): one row per request, unique on its request id.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-25 09:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import dsched_server.store.types

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "control_requests",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("request_id", sa.String(length=128), nullable=False),
        sa.Column("workflow_instance_id", _ID, nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("requested_by", sa.String(length=255), nullable=False),
        sa.Column("create_time", dsched_server.store.types.UtcDateTime(), nullable=False),
        sa.Column("outcome", sa.String(length=32), nullable=False),
        sa.Column("outcome_state", sa.String(length=32), nullable=True),
        sa.Column("outcome_reason", sa.String(length=1024), nullable=False),
        sa.Column("applied_by", sa.BigInteger(), nullable=False),
        sa.Column("apply_time", dsched_server.store.types.UtcDateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["workflow_instance_id"],
            ["workflow_instances.id"],
            name=op.f("fk_control_requests_workflow_instance_id_workflow_instances"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_control_requests")),
        sa.UniqueConstraint("request_id", name=op.f("uq_control_requests_request_id")),
        sqlite_autoincrement=True,
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_bin",
    )
    op.create_index(
        "ix_control_requests_instance",
        "control_requests",
        ["workflow_instance_id", "outcome"],
        unique=False,
    )
    op.create_index(
        "ix_control_requests_outcome",
        "control_requests",
        ["outcome", "workflow_instance_id"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index("ix_control_requests_outcome", table_name="control_requests")
    op.drop_index("ix_control_requests_instance", table_name="control_requests")
    op.drop_table("control_requests")
