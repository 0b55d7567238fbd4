"""Alembic migrations of the metadata schema."""
