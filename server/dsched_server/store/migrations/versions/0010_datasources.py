"""datasources

Named database connections for SQL and PROCEDURE tasks; unique by name. ``password`` holds a
Fernet token (the key is a file outside the database), NULL when none is set.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-29 05:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import dsched_server.store.types

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_TIME = dsched_server.store.types.UtcDateTime


def upgrade() -> None:
    op.create_table(
        "datasources",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("type", sa.String(length=32), nullable=False),
        sa.Column("description", sa.String(length=1024), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("port", sa.Integer(), nullable=False),
        sa.Column("database", sa.String(length=1024), nullable=False),
        sa.Column("user", sa.String(length=128), nullable=False),
        sa.Column("password", sa.Text(), nullable=True),
        sa.Column("options", sa.JSON(), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("create_time", _TIME(), nullable=False),
        sa.Column("update_time", _TIME(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_datasources")),
        sa.UniqueConstraint("name", name=op.f("uq_datasources_name")),
        sqlite_autoincrement=True,
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_bin",
    )


def downgrade() -> None:
    op.drop_table("datasources")
