"""Alembic environment: dsched runs migrations programmatically on a connection it passes in."""

from __future__ import annotations

from alembic import context

from dsched_server.store.models import Base

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through dsched_server.store.database.Database.migrate")
context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    render_as_batch=True,  # SQLite can only ALTER tables by copying them
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
