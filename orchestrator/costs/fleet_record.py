"""The store's cost facts and the ledger as the autoscaler's fleet record (its `FleetRecord`
port): facts go to the store, today's spend comes back from the ledger."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal

from kernel.fleet_facts import InstanceSeen, PriceSeen
from orchestrator.costs.ledger import CostLedger
from orchestrator.store.cost_facts import CostFactBook


class StoreFleetRecord:
    def __init__(self, facts: CostFactBook, ledger: CostLedger) -> None:
        self._facts, self._ledger = facts, ledger

    def record_instances_seen(self, seen: Sequence[InstanceSeen]) -> None:
        self._facts.record_instances_seen(seen)

    def record_instance_ended(self, instance_id: str, at: datetime, reason: str) -> None:
        self._facts.record_instance_ended(instance_id, at, reason)

    def record_prices(self, prices: Sequence[PriceSeen]) -> None:
        self._facts.record_prices(prices)

    def spent_today(self) -> Decimal:
        return self._ledger.spent_today()
