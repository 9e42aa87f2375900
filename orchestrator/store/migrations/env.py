"""Alembic environment: runs on a connection handed in by orchestrator.store.migrate."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection
from sqlmodel import SQLModel

from orchestrator.store import tables  # noqa: F401  (registers the tables on the metadata)
from orchestrator.store.engine import make_engine

target_metadata = SQLModel.metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = make_engine(context.config.get_main_option("sqlalchemy.url") or "")
    with engine.connect() as new_connection:
        _run(new_connection)
    engine.dispose()


run_migrations_online()
