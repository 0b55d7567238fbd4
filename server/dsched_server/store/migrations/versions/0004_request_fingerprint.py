"""request fingerprint

A request_id names one request: the request log keeps a fingerprint of the request it answered
(SHA-256 of the request without its request_id), so the same id sent with a different request is
refused (REQUEST_ID_REUSED) instead of silently answered with the first request's answer. Rows
written before this revision have none and are not compared.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-26 10:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("request_log", sa.Column("fingerprint", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("request_log") as batch:
        batch.drop_column("fingerprint")
