"""Each spot pool's interruption rate, shared with the control plane: it sends the rate of an
assignment's pool with the assignment (the job's checkpoint interval on that pool). Written
when a rate moved by more than a tenth, a pool came or went, or the last write grew old."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from autoscaler.market.quotes import MarketSnapshot
from kernel.market import Market

RATES_REFRESH = timedelta(minutes=10)
PoolKey = tuple[str, str]  # (instance type, availability zone)


@dataclass
class RateSharing:
    shared: dict[PoolKey, float] = field(default_factory=dict)  # as last written
    shared_at: datetime | None = None

    def due(self, market: MarketSnapshot, now: datetime) -> dict[PoolKey, float] | None:
        """The rates to write now (None: those written still hold)."""
        rates = {
            (pool.instance_type, pool.availability_zone): quote.interruptions_per_hour
            for pool, quote in market.quotes.items()
            if pool.market is Market.SPOT
        }
        moved = rates.keys() != self.shared.keys() or any(
            abs(rate - self.shared[key]) > 0.1 * max(rate, self.shared[key])
            for key, rate in rates.items()
        )
        if moved or self.shared_at is None or now - self.shared_at >= RATES_REFRESH:
            return rates
        return None

    def written(self, rates: dict[PoolKey, float], now: datetime) -> None:
        self.shared, self.shared_at = rates, now
