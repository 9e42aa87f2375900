"""The autoscaler's memory of pools that failed it, in the store (see kernel PoolMark)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlmodel import col, select

from kernel.fleet_facts import PoolMark
from kernel.market import Market
from orchestrator.store.base import StoreBase, utc
from orchestrator.store.tables import PoolMarkRow


class PoolMarkBook(StoreBase):
    def record_pool_marks(self, marks: Sequence[PoolMark]) -> None:
        if not marks:
            return
        with self._session() as session:
            for mark in marks:
                session.add(
                    PoolMarkRow(
                        instance_type=mark.instance_type,
                        availability_zone=mark.availability_zone,
                        market=mark.market.value,
                        at=mark.at,
                        until=mark.until,
                        reason=mark.reason[:500],
                        interruption=mark.interruption,
                    )
                )
            session.commit()

    def pool_marks_after(
        self, after_id: int, since: datetime, limit: int = 50_000
    ) -> list[tuple[int, PoolMark]]:
        """(id, mark) of the marks stored after `after_id` that were made after `since` or are
        still in force then, oldest first."""
        with self._session() as session:
            rows = session.exec(
                select(PoolMarkRow)
                .where(col(PoolMarkRow.id) > after_id)
                .where((col(PoolMarkRow.at) >= since) | (col(PoolMarkRow.until) > since))
                .order_by(col(PoolMarkRow.id))
                .limit(limit)
            ).all()
        return [
            (
                row.id or 0,
                PoolMark(
                    row.instance_type,
                    row.availability_zone,
                    Market(row.market),
                    utc(row.at),
                    utc(row.until),
                    row.reason,
                    row.interruption,
                ),
            )
            for row in rows
        ]
