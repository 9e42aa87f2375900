"""Reservations: capacity the autoscaler bought or picked for a queued job."""

from __future__ import annotations

from collections.abc import Sequence

from kernel.job_record import Reservation
from orchestrator.store.base import StoreBase, rows_of, utc
from orchestrator.store.tables import ReservationRow


class ReservationBook(StoreBase):
    def reserve(self, reservations: Sequence[Reservation]) -> None:
        """Record (or replace) each job's reservation (kept until the job ends)."""
        with self._session() as session:
            for r in reservations:
                row = ReservationRow(
                    job_id=r.job_id, instance_id=r.instance_id, on_demand=r.on_demand,
                    expires_at=r.expires_at, seconds_per_step=r.seconds_per_step,
                    margin_seconds=r.margin_seconds,
                )  # fmt: skip
                session.merge(row)
            session.commit()

    def reservations(self, job_ids: Sequence[str]) -> dict[str, Reservation]:
        """The reservations of these jobs (expired claims included: see Reservation)."""
        with self._session() as session:
            rows = rows_of(session, ReservationRow, job_ids)
        return {
            r.job_id: Reservation(r.job_id, r.instance_id, r.on_demand, utc(r.expires_at),
                                  r.seconds_per_step, r.margin_seconds)
            for r in rows
        }  # fmt: skip
