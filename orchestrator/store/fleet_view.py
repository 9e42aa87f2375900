"""What the metrics and the autoscaler read of the jobs: the oldest queued job, the unfinished
jobs whose deadline is near, and when jobs arrived (small, indexed queries)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func
from sqlmodel import col, select

from kernel.job_state import ACTIVE_STATES, JobState
from orchestrator.store.base import StoreBase, utc
from orchestrator.store.tables import JobRow

UNFINISHED = tuple(s.value for s in (JobState.QUEUED, JobState.PREEMPTED, *ACTIVE_STATES))


class FleetViewBook(StoreBase):
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
