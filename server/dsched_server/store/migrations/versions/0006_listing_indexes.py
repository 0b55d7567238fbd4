"""listing indexes

Every filter of a List RPC is served by an index that ends in the listing's sort key, so a page is
a short walk in key order however many rows the table holds: instances by project (project_id, id),
by state (state, id) and by submit time (submit_time, id), next to the existing (workflow_id, id);
task instances of an instance by (workflow_instance_id, id), and its valid ones by
(workflow_instance_id, valid, id). Before, a project's instances were found by walking the whole
table in id order.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26 01:00:00.000000
"""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_workflow_instances_project", "workflow_instances", ["project_id", "id"])
    op.create_index(
        "ix_workflow_instances_submit_time", "workflow_instances", ["submit_time", "id"]
    )
    op.drop_index("ix_workflow_instances_state", table_name="workflow_instances")
    op.create_index("ix_workflow_instances_state", "workflow_instances", ["state", "id"])
    # The new index first: on MariaDB the foreign key on workflow_instance_id needs an index that
    # starts with it at every moment.
    op.create_index("ix_task_instances_instance", "task_instances", ["workflow_instance_id", "id"])
    op.drop_index("ix_task_instances_instance_valid", table_name="task_instances")
    op.create_index(
        "ix_task_instances_instance_valid",
        "task_instances",
        ["workflow_instance_id", "valid", "id"],
    )


def downgrade() -> None:
    op.drop_index("ix_task_instances_instance_valid", table_name="task_instances")
    op.create_index(
        "ix_task_instances_instance_valid", "task_instances", ["workflow_instance_id", "valid"]
    )
    op.drop_index("ix_task_instances_instance", table_name="task_instances")
    op.drop_index("ix_workflow_instances_state", table_name="workflow_instances")
    op.create_index("ix_workflow_instances_state", "workflow_instances", ["state"])
    op.drop_index("ix_workflow_instances_submit_time", table_name="workflow_instances")
    op.drop_index("ix_workflow_instances_project", table_name="workflow_instances")
