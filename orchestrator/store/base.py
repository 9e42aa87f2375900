"""What every part of the job store shares: sessions that translate database errors, the
row-to-record mapping with its spec cache, and the join to a job's current attempt."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, Protocol

from sqlalchemy import Engine, Row, Table
from sqlalchemy import select as select_columns
from sqlalchemy.exc import OperationalError
from sqlmodel import Session

from kernel.clock import Clock
from kernel.errors import StoreUnavailable
from kernel.job_record import JobEvent, JobRecord
from kernel.job_spec import JobSpec, parse_job
from kernel.job_state import JobState
from kernel.render_stage import RenderStage
from orchestrator.store.migrate import upgrade_to_head
from orchestrator.store.tables import (
    AttemptGpuRow,
    JobAttemptRow,
    JobEventRow,
    JobRow,
    ReservationRow,
)


def table_of(row: type[object]) -> Table:
    """A SQLModel table's Core table, for the hot paths that read columns, not objects."""
    table = getattr(row, "__table__")  # noqa: B009 - SQLModel leaves it untyped
    assert isinstance(table, Table)
    return table


JOBS, ATTEMPTS = table_of(JobRow), table_of(JobAttemptRow)
ATTEMPT_GPUS = table_of(AttemptGpuRow)
RESERVATIONS = table_of(ReservationRow)
# A job's columns but its spec: a spec is parsed once a process, keyed by its fingerprint (an
# operator's change gives it a new one), so the hot reads (queue, placements, a batch of
# moves) take the digest and fetch the text only of a spec this process has not seen.
JOB_COLUMNS = tuple(column for column in JOBS.c if column.name != "spec_json")
# A job's row joined to the row of its current attempt (who runs it, on which GPU).
CURRENT_ATTEMPT = (ATTEMPTS.c.job_id == JOBS.c.job_id) & (ATTEMPTS.c.attempt == JOBS.c.attempt)


class JobColumns(Protocol):
    """What a record is made of: a JobRow, or a row of JOB_COLUMNS."""

    @property
    def job_id(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def version(self) -> int: ...
    @property
    def attempt(self) -> int: ...
    @property
    def priority(self) -> int: ...
    @property
    def deadline(self) -> datetime | None: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def updated_at(self) -> datetime: ...
    @property
    def last_checkpoint(self) -> str | None: ...
    @property
    def checkpoint_step(self) -> int: ...
    @property
    def checkpoint_family(self) -> str | None: ...
    @property
    def job_faults(self) -> int: ...
    @property
    def not_before(self) -> datetime | None: ...
    @property
    def spec_sha256(self) -> str: ...

    @property
    def wait_reason(self) -> str | None: ...

    @property
    def capacity_wait(self) -> str | None: ...

    @property
    def stage(self) -> str | None: ...


def utc(value: datetime) -> datetime:
    # SQLite hands back naive datetimes; everything we store is UTC.
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def job_event(row: JobEventRow) -> JobEvent:
    """A line of a job's history as the store keeps it."""
    return JobEvent(
        row.job_id,
        utc(row.at),
        JobState(row.from_state) if row.from_state else None,
        JobState(row.to_state),
        row.version,
        row.attempt,
        row.actor,
        row.reason,
    )


def _record(row: JobColumns, spec: JobSpec, worker_id: str | None) -> JobRecord:
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
        checkpoint_family=row.checkpoint_family,
        job_faults=row.job_faults,
        not_before=utc(row.not_before) if row.not_before else None,
        worker_id=worker_id,
        wait_reason=row.wait_reason,
        capacity_wait=row.capacity_wait,
        stage=RenderStage(row.stage) if row.stage else None,
    )


def in_chunks(job_ids: Sequence[str], size: int = 500) -> Iterator[Sequence[str]]:
    """Bounded IN lists: a query per `size` ids, whatever the batch's length."""
    for start in range(0, len(job_ids), size):
        yield job_ids[start : start + size]


class StoreBase:
    """What every part of the store stands on: the engine, the clock, sessions, and the parsed
    specs (`specs`: one cache shared by the parts of one store)."""

    def __init__(
        self, engine: Engine, clock: Clock, specs: dict[str, JobSpec] | None = None
    ) -> None:
        self._engine = engine
        self._clock = clock
        self._specs: dict[str, JobSpec] = {} if specs is None else specs

    @contextmanager
    def _session(self) -> Iterator[Session]:
        try:
            with Session(self._engine, expire_on_commit=False) as session:
                yield session
        except OperationalError as error:
            raise StoreUnavailable(f"database error: {error.orig}") from error

    def _records(self, session: Session, job_ids: Sequence[str]) -> dict[str, JobRecord]:
        rows: list[Row[Any]] = []
        for chunk in in_chunks(job_ids):
            query = (
                select_columns(*JOB_COLUMNS, ATTEMPTS.c.worker_id)
                .outerjoin(ATTEMPTS, CURRENT_ATTEMPT)
                .where(JOBS.c.job_id.in_(chunk))
            )
            rows.extend(session.execute(query))
        return {record.job_id: record for record in self._light_records(session, rows)}

    def _cached_record(self, row: JobRow, worker_id: str | None = None) -> JobRecord:
        # Parsing a spec costs more than reading its row; a changed spec has a new fingerprint.
        spec = self._specs.get(row.spec_sha256) or self._remember_spec(
            row.spec_sha256, row.spec_json
        )
        return _record(row, spec, worker_id)

    def _remember_spec(self, digest: str, spec_json: str) -> JobSpec:
        spec = parse_job(spec_json, now=None)
        if len(self._specs) > 50_000:
            self._specs.clear()
        self._specs[digest] = spec
        return spec

    def _light_records(
        self, session: Session, rows: Iterable[Row[Any]], worker_of: str | None = "worker_id"
    ) -> list[JobRecord]:
        """Records of rows of JOB_COLUMNS (with the attempt's worker in `worker_of`); the
        specs this process has not parsed yet are fetched in one query."""
        rows = list(rows)
        specs = {
            row.spec_sha256: self._specs[row.spec_sha256]
            for row in rows
            if row.spec_sha256 in self._specs
        }
        missing = [row.job_id for row in rows if row.spec_sha256 not in specs]
        for chunk in in_chunks(missing):
            query = select_columns(JOBS.c.spec_sha256, JOBS.c.spec_json).where(
                JOBS.c.job_id.in_(chunk)
            )
            for digest, spec_json in session.execute(query):
                specs[digest] = self._remember_spec(digest, spec_json)
        return [
            _record(row, specs[row.spec_sha256], getattr(row, worker_of) if worker_of else None)
            for row in rows
        ]

    @property
    def engine(self) -> Engine:
        return self._engine

    def upgrade(self) -> None:
        upgrade_to_head(self._engine)

    def dispose(self) -> None:
        self._engine.dispose()
