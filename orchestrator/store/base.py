"""What every part of the job store shares: sessions that translate database errors, the
row-to-record mapping with its spec cache, and the join to a job's current attempt."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TypeVar

from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError
from sqlmodel import Session, col, select

from kernel.clock import Clock
from kernel.errors import StoreUnavailable
from kernel.job_record import JobRecord
from kernel.job_spec import JobSpec, parse_job
from kernel.job_state import JobState
from orchestrator.store.migrate import upgrade_to_head
from orchestrator.store.tables import JobAttemptRow, JobRow, ReservationRow

# A job's row joined to the row of its current attempt (who runs it, on which GPU).
CURRENT_ATTEMPT = (col(JobAttemptRow.job_id) == col(JobRow.job_id)) & (
    col(JobAttemptRow.attempt) == col(JobRow.attempt)
)


def utc(value: datetime) -> datetime:
    # SQLite hands back naive datetimes; everything we store is UTC.
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _record(row: JobRow, spec: JobSpec, worker_id: str | None) -> JobRecord:
    return JobRecord(
        job_id=row.job_id,
        state=JobState(row.state),
        version=row.version,
        attempt=row.attempt,
        priority=row.priority,
        deadline=utc(row.deadline) if row.deadline else None,
        spec=spec,
        created_at=utc(row.created_at),
        updated_at=utc(row.updated_at),
        last_checkpoint=row.last_checkpoint,
        checkpoint_step=row.checkpoint_step,
        job_faults=row.job_faults,
        not_before=utc(row.not_before) if row.not_before else None,
        worker_id=worker_id,
    )


_Keyed = TypeVar("_Keyed", JobRow, ReservationRow)


def rows_of(session: Session, table: type[_Keyed], job_ids: Sequence[str]) -> list[_Keyed]:
    found: list[_Keyed] = []
    for start in range(0, len(job_ids), 500):  # bounded IN lists
        chunk = job_ids[start : start + 500]
        found.extend(session.exec(select(table).where(col(table.job_id).in_(chunk))).all())
    return found


class StoreBase:
    def __init__(self, engine: Engine, clock: Clock) -> None:
        self._engine = engine
        self._clock = clock
        self._specs: dict[str, JobSpec] = {}

    @contextmanager
    def _session(self) -> Iterator[Session]:
        try:
            with Session(self._engine, expire_on_commit=False) as session:
                yield session
        except OperationalError as error:
            raise StoreUnavailable(f"database error: {error.orig}") from error

    @staticmethod
    def _rows(session: Session, job_ids: Sequence[str]) -> Sequence[JobRow]:
        return rows_of(session, JobRow, job_ids)

    def _records(self, session: Session, job_ids: Sequence[str]) -> dict[str, JobRecord]:
        found: dict[str, JobRecord] = {}
        for start in range(0, len(job_ids), 500):  # bounded IN lists
            query = (
                select(JobRow, JobAttemptRow.worker_id)
                .outerjoin(JobAttemptRow, CURRENT_ATTEMPT)
                .where(col(JobRow.job_id).in_(job_ids[start : start + 500]))
            )
            for row, worker_id in session.exec(query):
                found[row.job_id] = self._cached_record(row, worker_id)
        return found

    def _cached_record(self, row: JobRow, worker_id: str | None = None) -> JobRecord:
        # Parsing a spec costs more than reading its row; specs never change once stored.
        spec = self._specs.get(row.spec_sha256)
        if spec is None:
            spec = parse_job(row.spec_json, now=None)
            if len(self._specs) > 50_000:
                self._specs.clear()
            self._specs[row.spec_sha256] = spec
        return _record(row, spec, worker_id)

    @property
    def engine(self) -> Engine:
        return self._engine

    def upgrade(self) -> None:
        upgrade_to_head(self._engine)

    def dispose(self) -> None:
        self._engine.dispose()
