"""What the control plane records and reads of instances outside the job store: warnings and
ends into each instance's one record (`instance_records`), so a gone instance stays gone across
restarts and replicas, and what EC2 said of each instance the autoscaler saw (what a worker's
hello is checked against)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlmodel import Session, col, select

from kernel.clock import Clock
from kernel.errors import StoreUnavailable
from kernel.instance_state import NOT_WELCOME, InstanceState
from kernel.market import Market
from orchestrator.store.cost_facts import end_instance_life
from orchestrator.store.instance_records import move_instances
from orchestrator.store.tables import InstanceLifeRow, InstanceRow


class InstanceLedger:
    def __init__(self, engine: Engine, clock: Clock) -> None:
        self._engine = engine
        self._clock = clock

    def record_gone(self, instance_id: str, reason: str, ended: bool = False) -> None:
        """A spot warning (the instance is warned: its GPUs are no capacity, its hello is
        refused), or with `ended` EC2's word that it stopped running, which the cost ledger
        takes as the end of its bill unless an earlier end is known. The instance's one record
        keeps the first end reported."""
        now = self._clock.now()
        after = InstanceState.TERMINATED if ended else InstanceState.WARNED
        try:
            with Session(self._engine) as session:
                move_instances(session, [instance_id], after, reason, "control-plane", now)
                if ended:
                    end_instance_life(session, instance_id, now, reason)
                session.commit()
        except IntegrityError:
            pass  # another replica recorded it first
        except OperationalError as error:
            raise StoreUnavailable(f"database error: {error.orig}") from error

    def gone_since(self, since: datetime) -> list[str]:
        """The instances warned or gone since `since`, whose hellos are refused."""
        try:
            with Session(self._engine) as session:
                query = select(InstanceRow.instance_id).where(
                    col(InstanceRow.since) >= since,
                    col(InstanceRow.state).in_([s.value for s in NOT_WELCOME]),
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
