"""The ledger of gone instances (terminated or interrupted), so they stay gone across
control-plane restarts and replicas, and what EC2 said of each instance the autoscaler saw
(what a worker's hello is checked against)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlmodel import Session, col, select

from kernel.clock import Clock
from kernel.errors import StoreUnavailable
from kernel.market import Market
from orchestrator.store.cost_facts import end_instance_life
from orchestrator.store.tables import GoneInstanceRow, InstanceLifeRow


class InstanceLedger:
    def __init__(self, engine: Engine, clock: Clock) -> None:
        self._engine = engine
        self._clock = clock

    def record_gone(self, instance_id: str, reason: str, ended: bool = False) -> None:
        """Idempotent: the first report of an instance's end is the one kept. `ended`: EC2
        says it stopped running now (a state change, not a warning), which the cost ledger
        takes as the end of its bill unless an earlier end is known."""
        now = self._clock.now()
        try:
            with Session(self._engine) as session:
                if session.get(GoneInstanceRow, instance_id) is None:
                    session.add(
                        GoneInstanceRow(instance_id=instance_id, gone_at=now, reason=reason)
                    )
                if ended:
                    end_instance_life(session, instance_id, now, reason)
                session.commit()
        except IntegrityError:
            pass  # another replica recorded it first
        except OperationalError as error:
            raise StoreUnavailable(f"database error: {error.orig}") from error

    def gone_since(self, since: datetime) -> list[str]:
        try:
            with Session(self._engine) as session:
                query = select(GoneInstanceRow.instance_id).where(
                    col(GoneInstanceRow.gone_at) >= since
                )
                return list(session.exec(query))
        except OperationalError as error:
            raise StoreUnavailable(f"database error: {error.orig}") from error

    def launched_as(self, instance_id: str) -> tuple[str, Market] | None:
        """Its type and market as EC2 listed them, or None if the autoscaler has not seen it."""
        try:
            with Session(self._engine) as session:
                row = session.get(InstanceLifeRow, instance_id)
        except OperationalError as error:
            raise StoreUnavailable(f"database error: {error.orig}") from error
        if row is None:
            return None
        return row.instance_type, Market(row.market)
