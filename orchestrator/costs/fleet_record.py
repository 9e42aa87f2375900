"""The store and the ledger as the autoscaler's fleet record (its `FleetRecord` port): facts
go to the store, today's spend comes back from the ledger."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal

from kernel.fleet_facts import InstanceSeen, PriceSeen
from orchestrator.costs.ledger import CostLedger
from orchestrator.store.job_store import JobStore


class LedgerRecord:
    def __init__(self, store: JobStore, ledger: CostLedger) -> None:
        self._store, self._ledger = store, ledger

    def record_instances_seen(self, seen: Sequence[InstanceSeen]) -> None:
        self._store.record_instances_seen(seen)

    def record_instance_ended(self, instance_id: str, at: datetime, reason: str) -> None:
        self._store.record_instance_ended(instance_id, at, reason)

    def record_prices(self, prices: Sequence[PriceSeen]) -> None:
        self._store.record_prices(prices)

    def spent_today(self) -> Decimal:
        return self._ledger.spent_today()
