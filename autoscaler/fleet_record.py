"""What the autoscaler tells the cost ledger, through a port of its own: instances as EC2
lists them (the ledger bills what EC2 reports, not what the autoscaler meant to launch), their
ends, and pool prices as they change. It reads back today's spend for the budget, so a
restart does not reset it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Protocol

from autoscaler.ec2.ports import ObservedInstance
from autoscaler.market.quotes import MarketSnapshot
from autoscaler.pools import Pool
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
