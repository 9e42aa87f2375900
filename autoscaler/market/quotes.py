"""What the purchase policy knows about each pool at one moment (a frozen snapshot)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from autoscaler.pools import Pool


@dataclass(frozen=True)
class PoolQuote:
    pool: Pool
    price_per_hour: float  # USD per instance-hour
    interruptions_per_hour: float  # 0 for on-demand
    available: bool = True
    why_unavailable: str = ""
    limit: str = ""  # the account limit holding the pool back, if that is why (`limits`)
    # The hours of watching behind `interruptions_per_hour` when it is a count over them (the
    # rate x these hours is how many were seen); None for a published rate.
    risk_hours: float | None = None


@dataclass(frozen=True)
class MarketSnapshot:
    at: datetime
    quotes: Mapping[Pool, PoolQuote]

    def quote(self, pool: Pool) -> PoolQuote | None:
        return self.quotes.get(pool)
