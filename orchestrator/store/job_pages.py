"""What the HTTP API reads of the store: pages of jobs (filtered, newest first, by cursor),
one job's attempts and progress, the job history as a feed, and instances' ends."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, or_
from sqlmodel import col, select

from kernel.instance_state import GONE, InstanceState
from kernel.job_record import JobEvent, JobRecord
from kernel.job_state import JobState
from orchestrator.store.base import StoreBase, in_chunks, job_event, utc
from orchestrator.store.tables import (
    InstanceChangeRow,
    JobAttemptRow,
    JobEventRow,
    JobProgressRow,
    JobRow,
)


@dataclass(frozen=True)
class JobFilter:
    states: tuple[JobState, ...] = ()
    tags: tuple[tuple[str, str], ...] = ()  # (team | customer | project, value)
    created_since: datetime | None = None
    created_until: datetime | None = None
    teams: tuple[str, ...] | None = None  # only these teams' jobs (None: every team's)


@dataclass(frozen=True)
class PageCursor:
    """The last job of the page before: the next page starts after it."""

    created_at: datetime
    job_id: str


@dataclass(frozen=True)
class AttemptFacts:
    attempt: int
    worker_id: str | None
    gpu_index: int | None
    started_at: datetime
    ended_at: datetime | None
    outcome: str | None
    checkpoints: int
    checkpointed_at: datetime | None


@dataclass(frozen=True)
class ProgressReport:
    job_id: str
    attempt: int
    step: int
    total_steps: int
    at: datetime


@dataclass(frozen=True)
class StoredProgress:
    attempt: int
    step: int
    total_steps: int
    reported_at: datetime
    first_step: int  # the attempt's first report: its pace is measured from there
    first_at: datetime

    def seconds_per_step(self) -> float | None:
        steps = self.step - self.first_step
        if steps <= 0:
            return None
        return (self.reported_at - self.first_at).total_seconds() / steps


@dataclass(frozen=True)
class GoneInstance:
    instance_id: str
    gone_at: datetime
    reason: str


TAG_COLUMNS = {"team": JobRow.team, "customer": JobRow.customer, "project": JobRow.project}


class JobPageBook(StoreBase):
    def job_page(self, where: JobFilter, after: PageCursor | None, limit: int) -> list[JobRecord]:
        query = select(JobRow)
        if where.states:
            query = query.where(col(JobRow.state).in_([s.value for s in where.states]))
        for tag, value in where.tags:
            query = query.where(col(TAG_COLUMNS[tag]) == value)
        if where.teams is not None:
            query = query.where(col(JobRow.team).in_(where.teams))
        if where.created_since is not None:
            query = query.where(col(JobRow.created_at) >= where.created_since)
        if where.created_until is not None:
            query = query.where(col(JobRow.created_at) < where.created_until)
        if after is not None:
            created = col(JobRow.created_at)
            query = query.where(
                or_(
                    created < after.created_at,
                    and_(created == after.created_at, col(JobRow.job_id) < after.job_id),
                )
            )
        query = query.order_by(col(JobRow.created_at).desc(), col(JobRow.job_id).desc())
        with self._session() as session:
            rows = session.exec(query.limit(limit)).all()
        return [self._cached_record(row) for row in rows]

    def attempts_facts(self, job_id: str) -> list[AttemptFacts]:
        with self._session() as session:
            rows = session.exec(
                select(JobAttemptRow)
                .where(col(JobAttemptRow.job_id) == job_id)
                .order_by(col(JobAttemptRow.attempt))
            ).all()
        return [
            AttemptFacts(
                row.attempt,
                row.worker_id,
                row.gpu_index,
                utc(row.started_at),
                utc(row.ended_at) if row.ended_at else None,
                row.outcome,
                row.checkpoints,
                utc(row.checkpointed_at) if row.checkpointed_at else None,
            )
            for row in rows
        ]

    def record_progress(self, reports: Sequence[ProgressReport]) -> None:
        """Each job's newest report; a new attempt starts its pace anew. Reports of jobs the
        store does not know are dropped."""
        if not reports:
            return
        with self._session() as session:
            known = set(
                session.exec(
                    select(JobRow.job_id).where(col(JobRow.job_id).in_([r.job_id for r in reports]))
                )
            )
            for report in reports:
                if report.job_id not in known:
                    continue
                row = session.get(JobProgressRow, report.job_id)
                if row is None:
                    row = JobProgressRow(
                        job_id=report.job_id,
                        attempt=report.attempt,
                        step=report.step,
                        total_steps=report.total_steps,
                        reported_at=report.at,
                        first_step=report.step,
                        first_at=report.at,
                    )
                elif row.attempt != report.attempt:  # a new attempt: its pace starts here
                    row.attempt, row.first_step, row.first_at = (
                        report.attempt,
                        report.step,
                        report.at,
                    )
                row.step, row.total_steps, row.reported_at = (
                    report.step,
                    report.total_steps,
                    report.at,
                )
                session.add(row)
            session.commit()

    def progress_of(self, job_id: str) -> StoredProgress | None:
        return self.progress_of_jobs([job_id]).get(job_id)

    def progress_of_jobs(self, job_ids: Sequence[str]) -> dict[str, StoredProgress]:
        found: dict[str, StoredProgress] = {}
        with self._session() as session:
            for chunk in in_chunks(job_ids):
                rows = session.exec(
                    select(JobProgressRow).where(col(JobProgressRow.job_id).in_(chunk))
                ).all()
                for row in rows:
                    found[row.job_id] = StoredProgress(
                        row.attempt,
                        row.step,
                        row.total_steps,
                        utc(row.reported_at),
                        row.first_step,
                        utc(row.first_at),
                    )
        return found

    def job_events_after(self, after_id: int, limit: int = 500) -> list[tuple[int, JobEvent]]:
        """The history of every job as one feed: lines after `after_id`, oldest first."""
        with self._session() as session:
            rows = session.exec(
                select(JobEventRow)
                .where(col(JobEventRow.id) > after_id)
                .order_by(col(JobEventRow.id))
                .limit(limit)
            ).all()
        return [(row.id or 0, job_event(row)) for row in rows]

    def last_job_event_id(self) -> int:
        with self._session() as session:
            row = session.exec(
                select(JobEventRow.id).order_by(col(JobEventRow.id).desc()).limit(1)
            ).first()
        return row or 0

    def gone_between(self, since: datetime, until: datetime) -> list[GoneInstance]:
        """Instances warned of an interruption or ended in [since, until): the first such move
        of each."""
        ends = [InstanceState.WARNED.value, *(state.value for state in GONE)]
        with self._session() as session:
            rows = session.exec(
                select(InstanceChangeRow)
                .where(col(InstanceChangeRow.at) >= since)
                .where(col(InstanceChangeRow.at) < until)
                .where(col(InstanceChangeRow.to_state).in_(ends))
                .order_by(col(InstanceChangeRow.at), col(InstanceChangeRow.id))
                .limit(10_000)
            ).all()
        first = {r.instance_id: r for r in reversed(rows)}
        return [
            GoneInstance(r.instance_id, utc(r.at), r.reason)
            for r in sorted(first.values(), key=lambda r: (r.at, r.id or 0))
        ]
