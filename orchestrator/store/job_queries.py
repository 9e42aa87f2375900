"""The job store's queries: jobs by id, the queue, history, placements, counts, and what the
metrics and the autoscaler read of the queue (the oldest queued job, deadlines near, arrivals)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import func
from sqlalchemy import select as select_columns
from sqlmodel import Session, col, select

from kernel.errors import JobNotFound
from kernel.job_record import FinishedRun, JobEvent, JobRecord, Placement
from kernel.job_state import ACTIVE_STATES, JobState
from orchestrator.store.base import (
    ATTEMPT_GPUS,
    ATTEMPTS,
    CURRENT_ATTEMPT,
    JOB_COLUMNS,
    JOBS,
    RESERVATIONS,
    StoreBase,
    job_event,
    utc,
)
from orchestrator.store.job_moves import WORKER_FAULT
from orchestrator.store.tables import JobAttemptRow, JobEventRow, JobRow

# At-risk deadline jobs one read takes at most: more than a fleet has GPUs, so the bound is
# reached only where most of them will miss anyway.
AT_RISK_MOST = 10_000
UNFINISHED = tuple(s.value for s in (JobState.QUEUED, JobState.PREEMPTED, *ACTIVE_STATES))


class JobQueries(StoreBase):
    def find(self, job_id: str) -> JobRecord | None:
        return self.find_many([job_id]).get(job_id)

    def get(self, job_id: str) -> JobRecord:
        record = self.find(job_id)
        if record is None:
            raise JobNotFound(job_id)
        return record

    def find_many(self, job_ids: Sequence[str]) -> dict[str, JobRecord]:
        """These jobs, each with the worker its current attempt was given to."""
        with self._session() as session:
            return self._records(session, job_ids)

    def schedulable(
        self,
        now: datetime,
        limit: int = 2000,
        risk_horizon: timedelta = timedelta(0),
        at_risk_most: int = AT_RISK_MOST,
    ) -> list[JobRecord]:
        """Queued jobs past their backoff for the scheduler, without repeats: the most urgent
        `limit` by base priority, the oldest `limit` (which aging may have made urgent), and
        however long the backlog every job holding a reservation and every job whose deadline
        is at risk (its `start_by` before `now + risk_horizon`, a start-up; at most
        `at_risk_most` of these, the nearest first)."""
        base = select_columns(*JOB_COLUMNS).where(
            JOBS.c.state == JobState.QUEUED.value,
            JOBS.c.not_before.is_(None) | (JOBS.c.not_before <= now),
        )
        claimed = select_columns(RESERVATIONS.c.job_id).where(
            RESERVATIONS.c.instance_id != "", RESERVATIONS.c.expires_at > now
        )
        with self._session() as session:
            urgent = session.execute(
                base.order_by(JOBS.c.priority.desc(), JOBS.c.created_at).limit(limit)
            ).all()
            oldest = session.execute(base.order_by(JOBS.c.created_at).limit(limit)).all()
            at_risk = session.execute(
                base.where(JOBS.c.start_by <= now + risk_horizon)
                .order_by(JOBS.c.start_by)
                .limit(at_risk_most)
            ).all()
            reserved = session.execute(base.where(JOBS.c.job_id.in_(claimed))).all()
            rows = {row.job_id: row for row in [*urgent, *oldest, *at_risk, *reserved]}
            return self._light_records(session, rows.values(), worker_of=None)

    def list_jobs(self, state: JobState | None = None, limit: int = 1000) -> list[JobRecord]:
        with self._session() as session:
            query = select(JobRow).order_by(col(JobRow.created_at), col(JobRow.job_id))
            if state is not None:
                query = query.where(col(JobRow.state) == state.value)
            return [self._cached_record(row) for row in session.exec(query.limit(limit)).all()]

    def history(self, job_id: str) -> list[JobEvent]:
        with self._session() as session:
            rows = session.exec(
                select(JobEventRow)
                .where(col(JobEventRow.job_id) == job_id)
                .order_by(col(JobEventRow.version))
            ).all()
        return [job_event(row) for row in rows]

    def finished_since(self, since: datetime, limit: int = 500) -> list[FinishedRun]:
        """Jobs that succeeded after `since` in their first attempt, with the denoising time
        their worker reported, oldest first."""
        with self._session() as session:
            rows = session.exec(
                select(JobRow, JobAttemptRow)
                .join(JobAttemptRow, CURRENT_ATTEMPT)
                .where(
                    col(JobRow.state) == JobState.SUCCEEDED.value,
                    col(JobRow.attempt) == 1,
                    col(JobRow.updated_at) > since,
                    col(JobAttemptRow.denoise_seconds).is_not(None),
                )
                .order_by(col(JobRow.updated_at))
                .limit(limit)
            ).all()
            return [
                FinishedRun(
                    job.job_id,
                    self._cached_record(job).spec,
                    attempt.worker_id,
                    attempt.denoise_seconds,
                    utc(job.updated_at),
                )
                for job, attempt in rows
                if attempt.worker_id is not None and attempt.denoise_seconds is not None
            ]

    def faulted_on(self, job_ids: Sequence[str]) -> dict[str, set[str]]:
        """job -> the workers an earlier attempt of it ended on through the worker's fault.
        Such attempts are rare and indexed: one small query, whatever the queue's length."""
        if not job_ids:
            return {}
        wanted = set(job_ids)
        found: dict[str, set[str]] = {}
        with self._session() as session:
            rows = session.exec(
                select(JobAttemptRow.job_id, JobAttemptRow.worker_id)
                .join(JobRow, col(JobRow.job_id) == col(JobAttemptRow.job_id))
                .where(
                    col(JobAttemptRow.outcome) == WORKER_FAULT,
                    col(JobRow.state) == JobState.QUEUED.value,
                )
            ).all()
        for job_id, worker_id in rows:
            if worker_id is not None and job_id in wanted:
                found.setdefault(job_id, set()).add(worker_id)
        return found

    def placements(self) -> list[Placement]:
        """Jobs assigned, running or checkpointing, with the worker and GPU of their attempt."""
        active = [state.value for state in ACTIVE_STATES]
        query = (
            select_columns(
                *JOB_COLUMNS, ATTEMPTS.c.worker_id, ATTEMPTS.c.gpu_index, ATTEMPTS.c.started_at
            )
            .join(ATTEMPTS, CURRENT_ATTEMPT)
            .where(JOBS.c.state.in_(active))
            .order_by(JOBS.c.job_id)
        )
        with self._session() as session:
            rows = session.execute(query).all()
            records = self._light_records(session, rows)
            spans = self._spans(session, [r for r in records if r.spec.gpu.count > 1])
        return [
            Placement(
                record,
                row.worker_id or "",
                row.gpu_index or 0,
                utc(row.started_at),
                tuple(i for i in spans.get(record.job_id, ()) if i != row.gpu_index),
            )
            for record, row in zip(records, rows, strict=True)
        ]

    @staticmethod
    def _spans(session: Session, spanning: list[JobRecord]) -> dict[str, tuple[int, ...]]:
        """The GPUs each spanning job's current attempt holds, its lead GPU among them."""
        if not spanning:
            return {}
        attempt = {record.job_id: record.attempt for record in spanning}
        query = (
            select_columns(ATTEMPT_GPUS.c.job_id, ATTEMPT_GPUS.c.attempt, ATTEMPT_GPUS.c.gpu_index)
            .where(ATTEMPT_GPUS.c.job_id.in_(list(attempt)), ATTEMPT_GPUS.c.ended_at.is_(None))
            .order_by(ATTEMPT_GPUS.c.job_id, ATTEMPT_GPUS.c.gpu_index)
        )
        gpus: dict[str, list[int]] = {}
        for row in session.execute(query).all():
            if attempt[row.job_id] == row.attempt:
                gpus.setdefault(row.job_id, []).append(row.gpu_index)
        return {job_id: tuple(indexes) for job_id, indexes in gpus.items()}

    def count_jobs(self) -> int:
        with self._session() as session:
            return session.exec(select(func.count()).select_from(JobRow)).one()

    def count_by_state(self, teams: Sequence[str] | None = None) -> dict[JobState, int]:
        """`teams`: only those teams' jobs (None: every job)."""
        query = select(JobRow.state, func.count()).group_by(col(JobRow.state))
        if teams is not None:
            query = query.where(col(JobRow.team).in_(list(teams)))
        with self._session() as session:
            rows = session.exec(query).all()
        return {JobState(state): count for state, count in rows}

    # -- what the metrics and the autoscaler read of the queue (small, indexed queries) --

    def oldest_queued_at(self) -> datetime | None:
        with self._session() as session:
            oldest = session.exec(
                select(func.min(JobRow.created_at)).where(
                    col(JobRow.state) == JobState.QUEUED.value
                )
            ).one()
        return utc(oldest) if oldest is not None else None

    def deadlines_before(self, moment: datetime) -> list[tuple[str, datetime]]:
        """Unfinished jobs due before `moment`: (job id, deadline), soonest first."""
        with self._session() as session:
            rows = session.exec(
                select(JobRow.job_id, JobRow.deadline)
                .where(col(JobRow.state).in_(UNFINISHED))
                .where(col(JobRow.deadline).is_not(None))
                .where(col(JobRow.deadline) < moment)
                .order_by(col(JobRow.deadline))
                .limit(10_000)
            ).all()
        return [(job_id, utc(deadline)) for job_id, deadline in rows if deadline is not None]

    def arrivals_since(self, since: datetime, limit: int = 50_000) -> list[datetime]:
        """When each job accepted after `since` arrived, oldest first (the forecast's input)."""
        with self._session() as session:
            rows = session.exec(
                select(JobRow.created_at)
                .where(col(JobRow.created_at) > since)
                .order_by(col(JobRow.created_at))
                .limit(limit)
            ).all()
        return [utc(at) for at in rows]
