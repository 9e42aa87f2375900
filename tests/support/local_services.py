"""The services the tests run against: moto's region, PostgreSQL at 127.0.0.1:5432 (a schema of
one's own), the SQS queues a test makes."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sqlalchemy import create_engine, text

POSTGRES_ADMIN_URL = os.environ.get(
    "FRAMEFLEET_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


REGION = "us-east-1"


@dataclass(frozen=True)
class Queues:
    jobs_url: str
    dead_letter_url: str


@contextmanager
def own_postgres_schema() -> Iterator[str]:
    """A database URL whose schema is its own, dropped afterwards."""
    schema = f"ff_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(POSTGRES_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    yield f"{POSTGRES_ADMIN_URL}?options=-csearch_path%3D{schema}"
    with admin.connect() as connection:
        connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    admin.dispose()
