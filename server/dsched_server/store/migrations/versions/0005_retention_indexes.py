"""retention indexes

Retention (README "Retention") walks the request log by age and finished instances by end time, a
bounded batch at a time; these indexes keep each batch a range read instead of a table scan.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-26 01:00:00.000000
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_request_log_create_time", "request_log", ["create_time"])
    op.create_index("ix_workflow_instances_end_time", "workflow_instances", ["end_time", "id"])


def downgrade() -> None:
    op.drop_index("ix_workflow_instances_end_time", table_name="workflow_instances")
    op.drop_index("ix_request_log_create_time", table_name="request_log")
