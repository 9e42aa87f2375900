"""Leases: the one replica that may act alone (schedule, re-send commands, buy capacity).

Expiry is judged by the database's clock on PostgreSQL (replicas on different hosts share
it), by the injected clock on SQLite (one host). Every new holder gets a larger fence token,
and every write of a holder checks its token in the same transaction (`check_fence`): a
deposed holder's late write fails instead of landing."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from kernel.errors import FrameFleetError
from orchestrator.store.base import StoreBase, utc
from orchestrator.store.tables import LeaseRow


@dataclass(frozen=True)
class Fence:
    name: str
    holder: str
    token: int


class NotLeader(FrameFleetError):
    def __init__(self, fence: Fence) -> None:
        super().__init__(
            f"{fence.holder} no longer holds the {fence.name} lease (fence {fence.token})"
        )
        self.fence = fence


def check_fence(session: Session, fence: Fence) -> None:
    """Inside a writing transaction: raise NotLeader unless `fence` is still the lease's. On
    PostgreSQL the row stays locked to the commit, so a takeover waits for this write."""
    result = session.exec(
        update(LeaseRow)
        .where(col(LeaseRow.name) == fence.name)
        .where(col(LeaseRow.holder) == fence.holder)
        .where(col(LeaseRow.fence) == fence.token)
        .values(fence=LeaseRow.fence)
        .execution_options(synchronize_session=False)
    )
    if result.rowcount != 1:
        raise NotLeader(fence)


class LeaseBook(StoreBase):
    def _lease_now(self, session: Session) -> datetime:
        if self._engine.dialect.name == "postgresql":
            return utc(session.exec(select(func.now())).one())
        return self._clock.now()

    def claim_lease(self, name: str, holder: str, ttl: timedelta) -> Fence | None:
        """Renew the lease if `holder` has it, take it if it is free or expired (a new fence);
        None while another holder's lease runs."""
        with self._session() as session:
            now = self._lease_now(session)
            row = session.exec(
                select(LeaseRow).where(col(LeaseRow.name) == name).with_for_update()
            ).first()
            if row is None:
                row = LeaseRow(name=name, holder=holder, fence=1, expires_at=now + ttl)
            elif row.holder == holder and utc(row.expires_at) > now:
                row.expires_at = now + ttl
            elif utc(row.expires_at) <= now:
                row.holder, row.fence, row.expires_at = holder, row.fence + 1, now + ttl
            else:
                return None
            fence = Fence(name, holder, row.fence)
            session.add(row)
            try:
                session.commit()
            except IntegrityError:  # another replica created the lease first
                return None
        return fence

    def release_lease(self, fence: Fence) -> None:
        """Step down now (a clean stop): a standby need not wait for the lease to run out."""
        with self._session() as session:
            now = self._lease_now(session)
            session.exec(
                update(LeaseRow)
                .where(col(LeaseRow.name) == fence.name)
                .where(col(LeaseRow.holder) == fence.holder)
                .where(col(LeaseRow.fence) == fence.token)
                .values(expires_at=now)
            )
            session.commit()

    def lease_holder(self, name: str) -> tuple[str, int, datetime] | None:
        """(holder, fence, expires) of the lease, for operators and tests."""
        with self._session() as session:
            row = session.get(LeaseRow, name)
        return (row.holder, row.fence, utc(row.expires_at)) if row is not None else None
