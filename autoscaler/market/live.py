"""The live market: AWS prices refreshed periodically, advisor rates refined by what this fleet
saw, and the capacity-error memory. The Pricing API is optional; the dated table fills in."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from autoscaler.market.advisor import SpotAdvisor
from autoscaler.market.aws_prices import on_demand_price, spot_prices
from autoscaler.market.capacity import CapacityMemory
from autoscaler.market.on_demand import fallback_price
from autoscaler.market.quotes import MarketSnapshot, PoolQuote
from autoscaler.pools import Pool
from kernel.clock import Clock
from kernel.errors import AwsError
from kernel.market import Market

if TYPE_CHECKING:
    from types_aiobotocore_ec2.client import EC2Client
    from types_aiobotocore_pricing.client import PricingClient

log = logging.getLogger(__name__)


class LiveMarket:
    def __init__(
        self,
        ec2: EC2Client,
        pricing: PricingClient | None,
        advisor: SpotAdvisor,
        capacity: CapacityMemory,
        clock: Clock,
        refresh: timedelta = timedelta(minutes=5),
    ) -> None:
        self._ec2, self._pricing = ec2, pricing
        self._advisor, self._capacity, self._clock = advisor, capacity, clock
        self._refresh = refresh
        self._spot: dict[tuple[str, str], float] = {}
        self._spot_at: datetime | None = None
        self._on_demand: dict[tuple[str, str], float | None] = {}

    async def snapshot(self, pools: Sequence[Pool]) -> MarketSnapshot:
        now = self._clock.now()
        if self._spot_at is None or now - self._spot_at >= self._refresh:
            types = sorted({p.instance_type for p in pools if p.market is Market.SPOT})
            if types:
                try:
                    self._spot = await spot_prices(self._ec2, types, now, timedelta(hours=3))
                    self._spot_at = now
                except AwsError as error:
                    log.warning("spot prices not refreshed, using the last ones: %s", error)
        quotes: dict[Pool, PoolQuote] = {}
        for pool in pools:
            quote = await self._quote(pool)
            if quote is not None:
                quotes[pool] = quote
        return MarketSnapshot(now, quotes)

    async def _quote(self, pool: Pool) -> PoolQuote | None:
        if pool.market is Market.ON_DEMAND:
            price = await self._on_demand_price(pool.instance_type, pool.region)
            rate = 0.0
        else:
            price = self._spot.get((pool.instance_type, pool.availability_zone))
            entry = self._advisor.entry(pool.region, pool.instance_type)
            observed = self._capacity.observed_rate(pool)
            rate = max(entry.interruptions_per_hour if entry else 0.25 / 730, observed or 0.0)
        if price is None:
            return None
        return PoolQuote(pool, price, rate)

    async def _on_demand_price(self, instance_type: str, region: str) -> float | None:
        key = (instance_type, region)
        if key not in self._on_demand:
            price = None
            if self._pricing is not None:
                try:
                    price = await on_demand_price(self._pricing, instance_type, region)
                except AwsError as error:
                    log.info("Pricing API unavailable, using the dated table: %s", error)
            self._on_demand[key] = price or fallback_price(region, instance_type)
        return self._on_demand[key]
