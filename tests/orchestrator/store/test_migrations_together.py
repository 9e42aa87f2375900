"""Services that start together on an empty database migrate it once, under an advisory lock."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from sqlalchemy import text

from orchestrator.store.engine import make_engine
from orchestrator.store.migrate import upgrade_to_head


@pytest.mark.postgres
def test_services_starting_together_migrate_an_empty_database_once(postgres_url: str) -> None:
    """A deployment starts its control planes and autoscalers at once on an empty database;
    each migrates at start. Without the advisory lock two first migrations collided (seen in
    the deploy rehearsal: a duplicate key creating alembic_version)."""
    engines = [make_engine(postgres_url) for _ in range(4)]
    start, failures = threading.Barrier(len(engines)), []

    def migrate(engine: Any) -> None:
        start.wait()
        try:
            upgrade_to_head(engine)
        except Exception as error:  # every one must succeed
            failures.append(error)

    threads = [threading.Thread(target=migrate, args=(e,), daemon=True) for e in engines]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)  # without the lock: deadlocked
    assert failures == []
    with engines[0].connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM alembic_version")).scalar() == 1
    for engine in engines:
        engine.dispose()
