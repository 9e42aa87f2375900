"""A market replayed from real traces (../shared/traces): per-zone spot availability and the
real spot price per tick, plus each pool's on-demand price. Time comes from the injected clock,
and a reader only ever sees the past: `snapshot` at time t uses ticks up to t, never after.

The format and its checks: `trace_format.py` (and docs/trace-format.schema.json).
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
from autoscaler.market.trace_format import gpus_of, on_demand_price, read_zone_file, spot_series
from autoscaler.pools import Pool
from kernel.clock import Clock
from kernel.errors import ConfigurationError
from kernel.market import Market

# The availability traces start on the day their folder names (2023-02-15).
DEFAULT_START = datetime(2023, 2, 15, tzinfo=UTC)


@dataclass(frozen=True)
class ZoneTrace:
    zone: str
    instance_type: str
    available: tuple[int, ...]  # 1: spot capacity at that tick, 0: none
    prices: tuple[float, ...]  # USD/hour per tick, same length
    on_demand_price: float  # USD/hour
    gpus: int  # per instance


@dataclass(frozen=True)
class Trace:
    start: datetime
    gap: timedelta
    zones: dict[str, ZoneTrace]

    @property
    def ticks(self) -> int:
        return min(len(z.available) for z in self.zones.values())

    def on_demand_price(self, instance_type: str) -> float | None:
        zones = [z for z in self.zones.values() if z.instance_type == instance_type]
        return zones[0].on_demand_price if zones else None

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
    """Every zone file in `folder`, checked together (`trace_format`): a trace that cannot be
    replayed as it is raises ConfigurationError saying what is missing."""
    if not folder.is_dir():
        raise ConfigurationError(f"no trace folder at {folder}")
    price_file = folder / "spot_prices.json"
    shared: dict[str, list[float]] = (
        json.loads(price_file.read_text()) if price_file.exists() else {}
    )
    zones: dict[str, ZoneTrace] = {}
    gaps: dict[str, int] = {}
    for path in sorted(folder.glob("*_*.json")):
        if path.name == "spot_prices.json":
            continue
        zone, named_type = path.stem.split("_", 1)
        zone_file = read_zone_file(path)
        meta = zone_file.metadata
        instance_type = meta.instance_type or named_type
        gaps[path.name] = meta.gap_seconds
        if meta.start is not None:  # a slice says where it begins
            start = meta.start if meta.start.tzinfo else meta.start.replace(tzinfo=UTC)
        zones[zone] = ZoneTrace(
            zone,
            instance_type,
            tuple(1 if v > 0 else 0 for v in zone_file.data),
            tuple(spot_series(zone, instance_type, zone_file, shared, path.name)),
            on_demand_price(zone, instance_type, zone_file, path.name),
            gpus_of(instance_type, zone_file, path.name),
        )
    if not zones:
        raise ConfigurationError(f"no availability traces (<zone>_<type>.json) in {folder}")
    if len(set(gaps.values())) > 1:
        raise ConfigurationError(f"zones with different tick spacings in {folder}: {gaps}")
    lengths = {z.zone: len(z.available) for z in zones.values()}
    if len(set(lengths.values())) > 1:
        raise ConfigurationError(
            f"zones of different lengths in {folder} (ticks): {lengths}; cut them to one length"
        )
    return Trace(start, timedelta(seconds=next(iter(gaps.values()))), zones)


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
        drops, up_hours = self.interruptions_seen(zone, tick)
        return drops / up_hours

    def interruptions_seen(self, zone: str, tick: int) -> tuple[int, float]:
        """The interruptions (1 -> 0) over the lookback up to `tick`, and the hours of it the
        zone had capacity (at least one)."""
        first = max(0, tick - self._lookback_ticks)
        drops = int(self._drops[zone][tick] - self._drops[zone][first])
        ups = int(self._ups[zone][tick + 1] - self._ups[zone][first])
        return drops, max(1.0, ups * self.trace.gap.total_seconds() / 3600)

    async def snapshot(self, pools: Sequence[Pool]) -> MarketSnapshot:
        now = self._clock.now()
        tick = self.trace.tick(now)
        quotes: dict[Pool, PoolQuote] = {}
        for pool in pools:
            zone = self.trace.zones.get(pool.availability_zone)
            if zone is None or zone.instance_type != pool.instance_type:
                continue
            if pool.market is Market.ON_DEMAND:
                quotes[pool] = PoolQuote(pool, zone.on_demand_price, 0.0)
                continue
            up = zone.available[tick] == 1
            drops, up_hours = self.interruptions_seen(zone.zone, tick)
            quotes[pool] = PoolQuote(
                pool,
                zone.prices[tick],
                drops / up_hours,
                available=up,
                why_unavailable="" if up else "no spot capacity in the trace at this tick",
                risk_hours=up_hours,
            )
        return MarketSnapshot(now, quotes)
