"""Reservations: the capacity the autoscaler bought or picked for a queued job, kept until the
job ends. Written by the autoscaler, read by the scheduler (each tick) and the API; the job
store's moves clear a reservation's instance when its job is placed and drop it when the job
ends (job_store.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Row, select, update

from kernel.job_record import Reservation
from kernel.job_state import ACTIVE_STATES, JobState
from orchestrator.store.base import JOBS, RESERVATIONS, StoreBase, in_chunks, utc
from orchestrator.store.tables import ReservationRow

# Columns, not objects: the scheduler reads them every tick.
_JOB = RESERVATIONS.c.job_id


class ReservationBook(StoreBase):
    def reserve(self, reservations: Sequence[Reservation]) -> None:
        """Record (or replace) each job's reservation (kept until the job ends). A claim on
        the instance the job already has one on keeps its first expiry: placing the job there
        again does not extend it (`autoscaler/reservations.py`)."""
        with self._session() as session:
            for r in reservations:
                held = session.get(ReservationRow, r.job_id)
                expires_at = r.expires_at
                if held is not None and r.instance_id and held.instance_id == r.instance_id:
                    expires_at = min(expires_at, utc(held.expires_at))
                row = ReservationRow(
                    job_id=r.job_id,
                    instance_id=r.instance_id,
                    on_demand=r.on_demand,
                    expires_at=expires_at,
                    seconds_per_step=r.seconds_per_step,
                    margin_seconds=r.margin_seconds,
                )
                session.merge(row)
            session.commit()

    def lapse(self, job_ids: Sequence[str]) -> None:
        """The scheduler found these jobs' claimed instances up and unable to run them: their
        claims end now (kept, so the autoscaler sees them lapsed and buys elsewhere)."""
        now = self._clock.now()
        with self._session() as session:
            for chunk in in_chunks(job_ids):
                session.execute(
                    update(RESERVATIONS)
                    .where(_JOB.in_(chunk), RESERVATIONS.c.expires_at > now)
                    .values(expires_at=now)
                )
            session.commit()

    def of(self, job_ids: Sequence[str]) -> dict[str, Reservation]:
        """The reservations of these jobs (expired claims included: see Reservation)."""
        rows: list[Row[Any]] = []
        with self._session() as session:
            for chunk in in_chunks(job_ids):
                rows.extend(session.execute(select(RESERVATIONS).where(_JOB.in_(chunk))))
        return _by_job(rows)

    def live(self) -> dict[str, Reservation]:
        """The reservations of every job queued or on a GPU: what the scheduler reads each
        tick, in one query whatever the queue's length (a job that ended has none)."""
        live = [JobState.QUEUED.value, *(state.value for state in ACTIVE_STATES)]
        query = select(RESERVATIONS).join(JOBS, JOBS.c.job_id == _JOB).where(JOBS.c.state.in_(live))
        with self._session() as session:
            return _by_job(session.execute(query).all())


def _by_job(rows: Sequence[Row[Any]]) -> dict[str, Reservation]:
    return {
        r.job_id: Reservation(
            r.job_id,
            r.instance_id,
            r.on_demand,
            utc(r.expires_at),
            r.seconds_per_step,
            r.margin_seconds,
        )
        for r in rows
    }
