"""spark application ids

A SPARK attempt records the id of the Spark application it runs (``local-…``, ``app-…``,
``driver-…``, ``application_…``, a Kubernetes submission id) while it runs, so that users can find
the job on the cluster and a re-run after a worker failover can kill the lost attempt's
application first (ARCHITECTURE.md §4). Empty for every other attempt.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-29 05:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("task_instances") as batch:
        batch.add_column(
            sa.Column("application_id", sa.String(length=320), nullable=False, server_default="")
        )


def downgrade() -> None:
    with op.batch_alter_table("task_instances") as batch:
        batch.drop_column("application_id")
