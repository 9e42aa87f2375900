from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kernel.clock import FakeClock
from orchestrator.store.engine import make_engine
from orchestrator.store.job_store import JobStore
from orchestrator.store.migrate import upgrade_to_head


@pytest.fixture
def store(tmp_path: Path, clock: FakeClock) -> Iterator[JobStore]:
    """A SQLite store on the test's clock: the outbox, the job history and the cursor."""
    engine = make_engine(f"sqlite:///{tmp_path / 'notices.db'}")
    upgrade_to_head(engine)
    store = JobStore(engine, clock)
    yield store
    store.dispose()
