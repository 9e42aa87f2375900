"""What interruption rate each spot pool is ranked by (pure): its zone's own, only where it
differs from its instance type's beyond counting noise.

A zone's rate is a count of interruptions over the hours it was watched. Two days of a market
with a few interruptions a day give each zone a handful, and zones that are alike differ by
chance: ranking zones by such rates buys the dearer zone on noise (issue 47: +6.9% over Greedy
on one week of the V100 trace, +18.9% on a scarce market). So each zone's count is held to what
its type's pooled rate predicts over the same hours (a Poisson count: its standard deviation is
the square root of its mean), and a zone within `NOISE_SIGMAS` of it is given the pooled rate;
zones then compete on price, as Greedy's do. A zone that stands out keeps its own rate. A rate
with no count behind it (a published one, `PoolQuote.risk_hours` None) is kept as it is.
"""

from __future__ import annotations

import math
from dataclasses import replace

from autoscaler.market.quotes import MarketSnapshot, PoolQuote
from kernel.market import Market

# How many standard deviations of a Poisson count a zone must stand out by to keep its rate.
NOISE_SIGMAS = 2.0


def type_level_risk(market: MarketSnapshot) -> MarketSnapshot:
    """The snapshot with each spot pool's interruption rate replaced by its instance type's
    mean over the zones quoted: zones of a type then compete on price (`zone_risk` off)."""
    rates: dict[str, list[float]] = {}
    for quote in market.quotes.values():
        if quote.pool.market is Market.SPOT:
            rates.setdefault(quote.pool.instance_type, []).append(quote.interruptions_per_hour)
    mean = {kind: sum(values) / len(values) for kind, values in rates.items()}
    return MarketSnapshot(
        market.at,
        {
            pool: replace(quote, interruptions_per_hour=mean[pool.instance_type])
            if pool.market is Market.SPOT
            else quote
            for pool, quote in market.quotes.items()
        },
    )


def zone_risk_beyond_noise(market: MarketSnapshot) -> MarketSnapshot:
    """The snapshot with each counted spot pool's rate replaced by its type's pooled rate
    where the zone's own count is within noise of it (`zone_risk` on)."""
    counted = _counted(market)
    seen: dict[str, float] = {}
    watched: dict[str, float] = {}
    for quote in counted:
        kind = quote.pool.instance_type
        hours = quote.risk_hours or 0.0
        seen[kind] = seen.get(kind, 0.0) + quote.interruptions_per_hour * hours
        watched[kind] = watched.get(kind, 0.0) + hours
    quotes = dict(market.quotes)
    for quote in counted:
        kind = quote.pool.instance_type
        pooled = seen[kind] / watched[kind]
        if within_noise(quote, pooled):
            quotes[quote.pool] = replace(quote, interruptions_per_hour=pooled)
    return MarketSnapshot(market.at, quotes)


def within_noise(quote: PoolQuote, pooled_rate: float) -> bool:
    """Whether the pool's count of interruptions is what `pooled_rate` predicts over the
    hours it was watched, give or take `NOISE_SIGMAS` standard deviations."""
    hours = quote.risk_hours or 0.0
    expected = pooled_rate * hours
    counted = quote.interruptions_per_hour * hours
    # At least one interruption's worth of spread: a count of 0 or 1 tells nothing apart.
    return abs(counted - expected) <= NOISE_SIGMAS * math.sqrt(max(expected, 1.0))


def _counted(market: MarketSnapshot) -> list[PoolQuote]:
    return [
        q
        for q in market.quotes.values()
        if q.pool.market is Market.SPOT and q.risk_hours is not None and q.risk_hours > 0
    ]
