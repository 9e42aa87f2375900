"""What the autoscaler tells the cost ledger, through a port of its own: instances as EC2
lists them (the ledger bills what EC2 reports, not what the autoscaler meant to launch), their
ends, and pool prices as they change. It reads back today's spend for the budget, so a
restart does not reset it (FleetRecorder, the loop's collaborator)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Protocol

from autoscaler.ec2.ports import ObservedInstance
from autoscaler.market.quotes import MarketSnapshot
from autoscaler.pools import Pool
from autoscaler.spend import Spend
from kernel.fleet_facts import InstanceSeen, PriceSeen
from kernel.instance_types import kind_of


class FleetRecord(Protocol):
    def record_instances_seen(self, seen: Sequence[InstanceSeen]) -> None: ...

    def record_instance_ended(self, instance_id: str, at: datetime, reason: str) -> None: ...

    def record_prices(self, prices: Sequence[PriceSeen]) -> None: ...

    def spent_today(self) -> Decimal: ...


def seen(instances: Iterable[ObservedInstance]) -> list[InstanceSeen]:
    return [
        InstanceSeen(
            instance_id=i.instance_id,
            instance_type=i.pool.instance_type,
            availability_zone=i.pool.availability_zone,
            market=i.pool.market,
            launched_at=i.launched_at,
            gpus=kind_of(i.pool.instance_type).gpus,
            gpu_family=kind_of(i.pool.instance_type).family.value,
        )
        for i in instances
    ]


class PriceTape:
    """The prices already handed to the ledger, so only changes are written."""

    def __init__(self) -> None:
        self._last: dict[Pool, float] = {}

    def changes(self, market: MarketSnapshot) -> list[PriceSeen]:
        changed = []
        for pool, quote in market.quotes.items():
            if self._last.get(pool) == quote.price_per_hour:
                continue
            self._last[pool] = quote.price_per_hour
            changed.append(
                PriceSeen(
                    pool.instance_type,
                    pool.availability_zone,
                    pool.market,
                    market.at,
                    Decimal(str(quote.price_per_hour)),  # the quote's shortest decimal form
                )
            )
        return changed


class FleetRecorder:
    """What the loop tells the cost ledger (each price once, when it changes), and today's
    spend as the budget reads it. Without a ledger (the `plan` command) nothing is recorded and
    today's spend accrues in memory from the instances' prices."""

    def __init__(self, record: FleetRecord | None = None) -> None:
        self._record = record
        self._prices = PriceTape()
        self.accrued = Spend()

    async def instances_seen(self, instances: Iterable[ObservedInstance]) -> None:
        if self._record is not None:
            await asyncio.to_thread(self._record.record_instances_seen, seen(instances))

    async def ended(self, ended: Sequence[tuple[str, str]], at: datetime) -> None:
        """(instance, reason) of instances that ended; the ledger keeps the earliest end
        reported (EventBridge's, when it came first)."""
        if self._record is None:
            return
        for instance_id, reason in ended:
            await asyncio.to_thread(self._record.record_instance_ended, instance_id, at, reason)

    async def prices(self, market: MarketSnapshot) -> None:
        """The market's prices that changed since the last call."""
        if self._record is not None:
            await asyncio.to_thread(self._record.record_prices, self._prices.changes(market))

    async def spent_today(self, now: datetime, fleet_per_hour: float) -> float:
        """The ledger's spend today (or accrued at `fleet_per_hour` until `now` without one)."""
        if self._record is None:
            return self.accrued.accrue(now, fleet_per_hour)
        return float(await asyncio.to_thread(self._record.spent_today))
