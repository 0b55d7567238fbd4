"""case-sensitive text on MariaDB

MariaDB's default utf8mb4 collations ignore case, unlike PostgreSQL and SQLite. Names the spec
validator treats as distinct collided in the unique keys there: projects 'etl' and 'ETL' were one
project (a lookup of either found the other), and a valid workflow with tasks 'load' and 'Load'
could not be stored (IntegrityError), nor could its task instances. Request ids differing in case
were one request. The binary collation compares text exactly, as the other backends do. Other
databases: no-op.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-24 10:00:00.000000
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

TABLES = (
    "projects",
    "workflows",
    "workflow_versions",
    "task_definitions",
    "task_edges",
    "workflow_instances",
    "commands",
    "task_instances",
    "instance_events",
    "servers",
    "request_log",
)


def _convert(collation: str) -> None:
    if op.get_bind().dialect.name not in ("mysql", "mariadb"):
        return
    for name in TABLES:
        op.execute(f"ALTER TABLE {name} CONVERT TO CHARACTER SET utf8mb4 COLLATE {collation}")


def upgrade() -> None:
    _convert("utf8mb4_bin")


def downgrade() -> None:
    _convert("utf8mb4_general_ci")
