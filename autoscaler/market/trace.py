"""A market replayed from real traces (../shared/traces): per-zone spot availability and the
real spot price per tick, plus the on-demand price. Time comes from the injected clock, and a
reader only ever sees the past: `snapshot` at time t uses ticks up to t, never after.

Trace format (skypilot-org/spot-traces): `{zone}_{type}.json` = {"metadata": {"gap_seconds": N},
"data": [1|0, ...]} with 1 = a spot instance could be had (a slice adds `"start"`, ISO 8601);
`spot_prices.json` = {"{zone}_v100_1": [USD/hour per tick]}.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import numpy.typing as npt

from autoscaler.market.quotes import MarketSnapshot, PoolQuote
from autoscaler.pools import Pool
from kernel.clock import Clock
from kernel.errors import ConfigurationError
from kernel.market import Market

# The availability traces start on the day their folder names (2023-02-15).
DEFAULT_START = datetime(2023, 2, 15, tzinfo=UTC)
ON_DEMAND_PRICES = {"p3.2xlarge": 3.06}


@dataclass(frozen=True)
class ZoneTrace:
    zone: str
    instance_type: str
    available: tuple[int, ...]
    prices: tuple[float, ...]  # USD/hour per tick, same length


@dataclass(frozen=True)
class Trace:
    start: datetime
    gap: timedelta
    zones: dict[str, ZoneTrace]

    @property
    def ticks(self) -> int:
        return min(len(z.available) for z in self.zones.values())

    @property
    def end(self) -> datetime:
        return self.start + self.gap * self.ticks

    def tick_at(self, at: datetime) -> int | None:
        """The tick of `at`, or None outside the trace."""
        index = int((at - self.start) / self.gap)
        return index if 0 <= index < self.ticks else None

    def tick(self, at: datetime) -> int:
        index = self.tick_at(at)
        if index is None:
            raise ConfigurationError(
                f"{at.isoformat()} is outside the trace "
                f"({self.start:%Y-%m-%d} to {self.end:%Y-%m-%d})"
            )
        return index


def load_trace(folder: Path, start: datetime = DEFAULT_START) -> Trace:
    if not folder.is_dir():
        raise ConfigurationError(f"no trace folder at {folder}")
    price_file = folder / "spot_prices.json"
    prices: dict[str, list[float]] = (
        json.loads(price_file.read_text()) if price_file.exists() else {}
    )
    zones: dict[str, ZoneTrace] = {}
    gap: int | None = None
    for path in sorted(folder.glob("*_*.json")):
        if path.name == "spot_prices.json":
            continue
        zone, instance_type = path.stem.split("_", 1)
        body = json.loads(path.read_text())
        gap = int(body["metadata"]["gap_seconds"])
        if "start" in body["metadata"]:  # a slice says where it begins
            start = datetime.fromisoformat(body["metadata"]["start"])
        available = tuple(int(v) for v in body["data"])
        family = "v100" if instance_type.startswith("p3.") else instance_type.split(".")[0]
        series = prices.get(f"{zone}_{family}_1") or body.get("prices")
        if not series:
            raise ConfigurationError(f"no spot prices for {zone} in {folder}")
        zones[zone] = ZoneTrace(zone, instance_type, available, tuple(float(p) for p in series))
    if not zones or gap is None:
        raise ConfigurationError(f"no availability traces (<zone>_<type>.json) in {folder}")
    return Trace(start, timedelta(seconds=gap), zones)


class TraceMarket:
    """The MarketData port over a trace. The interruption rate of a zone is what a live system
    could have measured by then: 1 -> 0 drops per available hour over the past `lookback`."""

    def __init__(self, trace: Trace, clock: Clock, lookback: timedelta = timedelta(days=2)):
        self.trace = trace
        self._clock = clock
        self._lookback_ticks = max(1, int(lookback / trace.gap))
        # Running counts, so a rate over the lookback costs two lookups, not a pass over it
        # (the simulator asks for every zone at every tick).
        self._drops: dict[str, npt.NDArray[np.int64]] = {}
        self._ups: dict[str, npt.NDArray[np.int64]] = {}
        for name, zone in trace.zones.items():
            series = np.asarray(zone.available, dtype=np.int64)
            drops = (series[:-1] == 1) & (series[1:] == 0)
            self._drops[name] = np.concatenate(([0], np.cumsum(drops, dtype=np.int64)))
            self._ups[name] = np.concatenate(([0], np.cumsum(series)))

    def pools(self) -> list[Pool]:
        return [
            Pool(z.instance_type, z.zone, market)
            for z in self.trace.zones.values()
            for market in (Market.SPOT, Market.ON_DEMAND)
        ]

    def available(self, zone: str, at: datetime) -> bool:
        return self.trace.zones[zone].available[self.trace.tick(at)] == 1

    def interruptions_per_hour(self, zone: str, tick: int) -> float:
        first = max(0, tick - self._lookback_ticks)
        drops = int(self._drops[zone][tick] - self._drops[zone][first])  # 1 -> 0 up to `tick`
        ups = int(self._ups[zone][tick + 1] - self._ups[zone][first])
        up_hours = max(1.0, ups * self.trace.gap.total_seconds() / 3600)
        return drops / up_hours

    async def snapshot(self, pools: Sequence[Pool]) -> MarketSnapshot:
        now = self._clock.now()
        tick = self.trace.tick(now)
        quotes: dict[Pool, PoolQuote] = {}
        for pool in pools:
            zone = self.trace.zones.get(pool.availability_zone)
            if zone is None or zone.instance_type != pool.instance_type:
                continue
            if pool.market is Market.ON_DEMAND:
                price = ON_DEMAND_PRICES.get(pool.instance_type)
                if price is not None:
                    quotes[pool] = PoolQuote(pool, price, 0.0)
                continue
            up = zone.available[tick] == 1
            quotes[pool] = PoolQuote(
                pool,
                zone.prices[tick],
                self.interruptions_per_hour(zone.zone, tick),
                available=up,
                why_unavailable="" if up else "no spot capacity in the trace at this tick",
            )
        return MarketSnapshot(now, quotes)
