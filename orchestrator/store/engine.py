"""Database engines: SQLite (a file, WAL) by default, PostgreSQL by URL."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, create_engine, event, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError

from kernel.errors import ConfigurationError


def redact_url(url: str) -> str:
    """The URL with its password masked, safe for logs."""
    return make_url(url).render_as_string(hide_password=True)


def make_engine(url: str) -> Engine:
    """An engine for `url`; a URL that cannot work is one ConfigurationError line, which never
    repeats the URL (it may hold a password)."""
    try:
        parsed = make_url(url)
        parsed.get_dialect()
    except (NoSuchModuleError, ImportError) as error:
        raise ConfigurationError(
            f"database_url names a database this install cannot reach: {error}"
        ) from None
    except ArgumentError:
        raise ConfigurationError(
            "database_url is not a database URL (dialect+driver://user:password@host/database)"
        ) from None
    if parsed.get_backend_name() == "sqlite":
        engine = create_engine(
            url, connect_args={"check_same_thread": False, "timeout": 30}, pool_pre_ping=False
        )
        _configure_sqlite(engine)
        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=8, max_overflow=8)


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take transaction control from pysqlite so every transaction can BEGIN IMMEDIATE:
        # writers then queue on the busy timeout instead of failing on a lock upgrade.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        # FULL: a commit is on disk before we delete the SQS message that carried the job.
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")
