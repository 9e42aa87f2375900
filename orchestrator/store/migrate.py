"""Apply the alembic migrations shipped inside the package."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, text
from sqlalchemy.exc import OperationalError

from kernel.errors import StoreUnavailable

MIGRATIONS_DIR = Path(__file__).with_name("migrations")


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return config


# Any constant: the key of the PostgreSQL advisory lock that migrations take.
MIGRATION_LOCK = 0x4652414D45  # "FRAME"


def upgrade_to_head(engine: Engine) -> None:
    """Migrate to the newest revision. On PostgreSQL under an advisory lock held for the
    transaction: a deployment starts its control planes and autoscalers at once on an empty
    database, and two concurrent first migrations collide creating the same tables."""
    config = alembic_config()
    try:
        with engine.begin() as connection:
            if connection.dialect.name == "postgresql":
                connection.execute(
                    text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK}
                )
            config.attributes["connection"] = connection
            command.upgrade(config, "head")
    except OperationalError as error:
        raise StoreUnavailable(f"database error: {error.orig}") from None
