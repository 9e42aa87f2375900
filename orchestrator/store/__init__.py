"""Durable state: SQLModel tables, alembic migrations, the job store."""
