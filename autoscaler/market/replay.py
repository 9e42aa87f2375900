"""A spot trace replayed in compressed time against a real EC2 endpoint (moto in the demo):
the market the autoscaler reads, and the capacity EC2 would have, come from the trace.

Time runs `speed` times faster in the trace than on the wall clock (kernel.clock.ReplayClock).
The autoscaler plans in wall time, so the market is quoted in it: a zone that loses capacity
once per trace hour loses it `speed` times per wall hour.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from autoscaler.ec2.ports import (
    CapacityUnavailable,
    Ec2Fleet,
    LaunchRequest,
    LaunchResult,
    ObservedInstance,
)
from autoscaler.market.quotes import MarketSnapshot
from autoscaler.market.trace import TraceMarket
from autoscaler.pools import Pool
from kernel.clock import Clock
from kernel.market import Market
from kernel.replay_clock import ReplayClock

# The code EC2 answers with when a pool has no spot capacity.
NO_CAPACITY = "InsufficientInstanceCapacity"


class ReplayedMarket:
    """The MarketData port over a trace replayed at the replay clock's speed."""

    def __init__(self, trace_market: TraceMarket, replay: ReplayClock, wall: Clock) -> None:
        self._trace, self._replay, self._wall = trace_market, replay, wall

    async def snapshot(self, pools: Sequence[Pool]) -> MarketSnapshot:
        recorded = await self._trace.snapshot(pools)
        quotes = {
            pool: replace(
                quote, interruptions_per_hour=quote.interruptions_per_hour * self._replay.speed
            )
            for pool, quote in recorded.quotes.items()
        }
        return MarketSnapshot(self._wall.now(), quotes)


class TraceCapacityGate:
    """The EC2 port with the trace's spot capacity in front: a spot launch into a zone the
    trace has no capacity in now fails with EC2's own error code, as AWS would answer; the rest
    go to the real endpoint."""

    def __init__(self, ec2: Ec2Fleet, trace_market: TraceMarket, replay: ReplayClock) -> None:
        self._ec2, self._trace, self._replay = ec2, trace_market, replay

    def _has_capacity(self, pool: Pool) -> bool:
        if pool.market is Market.ON_DEMAND:
            return True
        zone = self._trace.trace.zones.get(pool.availability_zone)
        return zone is not None and self._trace.available(zone.zone, self._replay.now())

    async def launch(self, request: LaunchRequest) -> LaunchResult:
        open_pools = tuple(p for p in request.pools if self._has_capacity(p))
        errors = tuple(
            CapacityUnavailable(
                p, NO_CAPACITY, "There is no Spot capacity available that matches your request."
            )
            for p in request.pools
            if p not in open_pools
        )
        if not open_pools:
            return LaunchResult((), errors)
        launched = await self._ec2.launch(replace(request, pools=open_pools))
        return LaunchResult(launched.instances, launched.errors + errors)

    async def terminate(self, instance_ids: Sequence[str]) -> None:
        await self._ec2.terminate(instance_ids)

    async def describe(self, fleet_id: str) -> list[ObservedInstance]:
        return await self._ec2.describe(fleet_id)
