"""Multi-GPU types beside a trace's own: the fleet simulator may buy them, so packing several
jobs onto one instance is measured, not assumed.

A trace records one instance type. A companion is another type of the same GPU family (p3.8xlarge
beside a p3.2xlarge trace) with:
- its real on-demand list price (the dated fallback table);
- a spot price that follows the trace's tick by tick, scaled per region by what the Spot
  Instance Advisor snapshot says each type saves against its on-demand price (us-east-1:
  p3.2xlarge saves 80%, p3.8xlarge 86%, so a p3.8xlarge costs 4 x 0.14 / 0.20 = 2.8 times the
  traced p3.2xlarge there: cheaper per GPU; in us-west-2 it is dearer per GPU);
- the trace's availability for its zone. That is an assumption the trace cannot check: a
  1-node trace says one instance could be had, not four GPUs on one host.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from autoscaler.market.advisor import SpotAdvisor
from autoscaler.market.on_demand import fallback_price
from autoscaler.market.ports import MarketData
from autoscaler.market.quotes import MarketSnapshot
from autoscaler.market.trace import Trace
from autoscaler.pools import Pool
from kernel.instance_types import CATALOG, InstanceKind
from kernel.market import Market


@dataclass(frozen=True)
class Companion:
    kind: InstanceKind
    on_demand_price: Mapping[str, float]  # region -> USD/hour
    spot_factor: Mapping[str, float]  # region -> its spot price / the traced type's


@dataclass(frozen=True)
class Companions:
    traced: str  # the trace's own instance type
    types: Mapping[str, Companion]

    def base(self, pool: Pool) -> Pool | None:
        """The traced pool a companion pool follows (None: not a companion there)."""
        companion = self.types.get(pool.instance_type)
        if companion is None or pool.region not in companion.spot_factor:
            return None
        return Pool(self.traced, pool.availability_zone, pool.market)

    def price(self, pool: Pool, traced_price: float) -> float:
        companion = self.types[pool.instance_type]
        if pool.market is Market.ON_DEMAND:
            return companion.on_demand_price[pool.region]
        return traced_price * companion.spot_factor[pool.region]


def no_companions(trace: Trace) -> Companions:
    return Companions(next(iter(trace.zones.values())).instance_type, {})


def companions_for(trace: Trace, advisor: SpotAdvisor | None = None) -> Companions:
    """Every catalogued type of the trace's GPU family with another GPU count, in the regions
    where both its on-demand price and both types' advisor savings are known."""
    advisor = advisor or SpotAdvisor.shipped()
    traced = next(iter(trace.zones.values())).instance_type
    own = CATALOG[traced]
    regions = sorted({Pool(traced, zone, Market.SPOT).region for zone in trace.zones})
    found = {}
    for kind in CATALOG.values():
        if kind.family is not own.family or kind.gpus == own.gpus:
            continue
        factors, on_demand = {}, {}
        for region in regions:
            theirs, ours = advisor.entry(region, kind.instance_type), advisor.entry(region, traced)
            price = fallback_price(region, kind.instance_type)
            own_price = fallback_price(region, traced)
            if theirs is None or ours is None or price is None or own_price is None:
                continue
            if ours.savings_percent >= 100:
                continue
            # Spot price = on-demand x (1 - savings), for each type, in the same region.
            theirs_spot = price * (100 - theirs.savings_percent)
            factors[region] = theirs_spot / (own_price * (100 - ours.savings_percent))
            on_demand[region] = price
        if factors:
            found[kind.instance_type] = Companion(kind, on_demand, factors)
    return Companions(traced, found)


class WithCompanions:
    """The MarketData port over a trace market, quoting the companion types too."""

    def __init__(self, market: MarketData, companions: Companions) -> None:
        self._market = market
        self._companions = companions

    async def snapshot(self, pools: Sequence[Pool]) -> MarketSnapshot:
        bases = {pool: self._companions.base(pool) for pool in pools}
        asked = {pool for pool in pools if pool.instance_type == self._companions.traced}
        asked |= {base for base in bases.values() if base is not None}
        seen = await self._market.snapshot(sorted(asked))
        wanted = set(pools)
        quotes = {pool: q for pool, q in seen.quotes.items() if pool in wanted}
        for pool, base in bases.items():
            traced = seen.quotes.get(base) if base is not None else None
            if traced is not None:
                price = self._companions.price(pool, traced.price_per_hour)
                quotes[pool] = replace(traced, pool=pool, price_per_hour=price)
        return MarketSnapshot(seen.at, quotes)
