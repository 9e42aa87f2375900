"""Spot pools' interruption rates, written by the autoscaler (from the market it reads) and
read by the control plane (for each assignment's checkpoint interval)."""

from __future__ import annotations

from collections.abc import Mapping

from sqlmodel import select

from orchestrator.store.base import StoreBase
from orchestrator.store.tables import PoolRateRow

PoolKey = tuple[str, str]  # (instance type, availability zone)


class PoolRateBook(StoreBase):
    def record_pool_rates(self, rates: Mapping[PoolKey, float]) -> None:
        if not rates:
            return
        now = self._clock.now()
        with self._session() as session:
            for (instance_type, zone), rate in rates.items():
                row = PoolRateRow(
                    instance_type=instance_type,
                    availability_zone=zone,
                    interruptions_per_hour=rate,
                    measured_at=now,
                )
                session.merge(row)
            session.commit()

    def pool_rates(self) -> dict[PoolKey, float]:
        with self._session() as session:
            rows = session.exec(select(PoolRateRow)).all()
        return {(r.instance_type, r.availability_zone): r.interruptions_per_hour for r in rows}
