"""Drain requests: how the autoscaler and the control plane agree that an instance is empty
before it is terminated, so that no job is assigned to a machine on its way out."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import update
from sqlmodel import col, delete, select

from kernel.job_record import DrainKind, DrainRequest
from orchestrator.store.base import StoreBase, utc
from orchestrator.store.tables import DrainRequestRow, InstanceLifeRow


class DrainBook(StoreBase):
    def ask_to_drain(
        self, instance_ids: Sequence[str], reason: str, kind: DrainKind = DrainKind.SCALE_IN
    ) -> None:
        """Idempotent: an instance asked twice keeps its first request."""
        if not instance_ids:
            return
        with self._session() as session:
            for instance_id in instance_ids:
                if session.get(DrainRequestRow, instance_id) is None:
                    row = DrainRequestRow(
                        instance_id=instance_id,
                        reason=reason[:500],
                        asked_at=self._clock.now(),
                        kind=kind.value,
                    )
                    session.add(row)
            # The cost ledger counts an instance's empty time from here on as draining.
            session.exec(
                update(InstanceLifeRow)
                .where(col(InstanceLifeRow.instance_id).in_(list(instance_ids)))
                .where(col(InstanceLifeRow.draining_at).is_(None))
                .values(draining_at=self._clock.now())
            )
            session.commit()

    def drain_requests(self) -> dict[str, DrainRequest]:
        with self._session() as session:
            rows = session.exec(select(DrainRequestRow)).all()
        return {
            r.instance_id: DrainRequest(
                r.instance_id,
                r.reason,
                utc(r.asked_at),
                utc(r.drained_at) if r.drained_at else None,
                DrainKind(r.kind),
            )
            for r in rows
        }

    def mark_drained(self, instance_ids: Sequence[str]) -> None:
        if not instance_ids:
            return
        with self._session() as session:
            for instance_id in instance_ids:
                row = session.get(DrainRequestRow, instance_id)
                if row is not None and row.drained_at is None:
                    row.drained_at = self._clock.now()
                    session.add(row)
            session.commit()

    def forget_drains(self, instance_ids: Sequence[str]) -> None:
        """The instances are terminated: their requests are done with."""
        if not instance_ids:
            return
        with self._session() as session:
            session.exec(
                delete(DrainRequestRow).where(col(DrainRequestRow.instance_id).in_(instance_ids))
            )
            session.commit()
