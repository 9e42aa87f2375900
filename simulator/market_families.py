"""Synthetic spot markets from a handful of parameters, in the trace format, so a policy is
judged on markets of every kind and not only on the ones it was tuned on (issue 47):

- `probe_seconds`: how often the market was looked at (the V100 traces: 195 s);
- `availability`: the long-run share of time a zone has spot capacity;
- `mean_outage_hours`: the mean length of a stretch without capacity (the stretches with it
  follow from the availability);
- `burstiness`: the spread of those lengths, as the sigma of a lognormal (0: exponential,
  memoryless; 1.5: most stretches short, a few very long);
- `shared_outages`: the share of a zone's outages that hit every zone at once;
- `price_ratio` and `volatility`: the mean spot price as a share of on-demand, and the
  hourly step of its random walk (log scale);
- `gpus`: a 1-GPU type (p3.2xlarge) or an 8-GPU one (p5.48xlarge).
Every family is drawn with a seed, so a study is repeatable byte for byte.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
import numpy.typing as npt

from autoscaler.market.trace import DEFAULT_START, Trace, ZoneTrace

ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
# Real us-east-1 on-demand list prices (autoscaler/market/on_demand.py's table).
TYPES = {1: ("p3.2xlarge", 3.06), 8: ("p5.48xlarge", 55.04)}


@dataclass(frozen=True)
class MarketFamily:
    name: str
    probe_seconds: float = 195.0
    availability: float = 0.8
    mean_outage_hours: float = 2.0
    burstiness: float = 0.0
    shared_outages: float = 0.0
    price_ratio: float = 0.3
    volatility: float = 0.01
    gpus: int = 1
    days: float = 18.0

    @property
    def ticks(self) -> int:
        return round(self.days * 86_400 / self.probe_seconds)

    def trace(self, seed: int = 1) -> Trace:
        rng = np.random.default_rng(seed)
        instance_type, on_demand = TYPES[self.gpus]
        # Outages every zone may share: each of them hits a zone with `shared_outages`.
        common = self._up(rng) if self.shared_outages > 0 else np.ones(self.ticks, np.int8)
        outage = np.cumsum(np.diff(common, prepend=np.int8(1)) == -1)  # its number
        zones = {}
        for zone in ZONES:
            hits = rng.random(int(outage[-1]) + 1) < self.shared_outages
            up = np.where((common == 0) & hits[outage], 0, self._up(rng)).astype(np.int8)
            zones[zone] = ZoneTrace(
                zone,
                instance_type,
                tuple(int(v) for v in up),
                tuple(float(p) for p in self._prices(rng, on_demand)),
                on_demand,
                self.gpus,
            )
        return Trace(DEFAULT_START, timedelta(seconds=self.probe_seconds), zones)

    def _length(self, rng: np.random.Generator, mean_hours: float) -> int:
        """One stretch, in probes (at least one)."""
        mean = mean_hours * 3600 / self.probe_seconds
        if self.burstiness <= 0:
            drawn = rng.exponential(mean)
        else:
            sigma = self.burstiness
            drawn = rng.lognormal(math.log(mean) - sigma**2 / 2, sigma)
        return max(1, round(drawn))

    def _up(self, rng: np.random.Generator) -> npt.NDArray[np.int8]:
        """Alternating stretches with and without capacity until the trace is full."""
        if self.availability >= 1:
            return np.ones(self.ticks, dtype=np.int8)
        mean_up = self.mean_outage_hours * self.availability / (1 - self.availability)
        values: list[int] = []
        state = int(rng.random() < self.availability)
        while len(values) < self.ticks:
            hours = mean_up if state else self.mean_outage_hours
            values.extend([state] * self._length(rng, hours))
            state = 1 - state
        return np.array(values[: self.ticks], dtype=np.int8)

    def _prices(self, rng: np.random.Generator, on_demand: float) -> npt.NDArray[np.float64]:
        """An hourly random walk around the mean, held between hours, never above on-demand."""
        per_hour = max(1, round(3600 / self.probe_seconds))
        hours = self.ticks // per_hour + 2
        walk = np.cumsum(rng.normal(0, self.volatility, hours)).clip(-0.5, 0.5)
        hourly = self.price_ratio * on_demand * np.exp(walk)
        prices: npt.NDArray[np.float64] = np.minimum(
            np.repeat(hourly, per_hour)[: self.ticks], on_demand
        )
        return prices


def held_index(probes: int, gap_seconds: float, step_seconds: float) -> npt.NDArray[np.int64]:
    """For a reading every `step_seconds` from the first of `probes` probes `gap_seconds` apart,
    the probe whose value it reads (the last one at or before it)."""
    readings = np.arange(0.0, probes * gap_seconds, step_seconds)
    return (readings // gap_seconds).astype(np.int64)


def resampled(trace: Trace, probe_seconds: float) -> Trace:
    """The same market looked at every `probe_seconds`: each probe reads the value the trace
    held at that moment (finer: each value held; coarser: what lay between probes unseen)."""
    old = trace.gap.total_seconds()
    ticks = int(trace.ticks * old // probe_seconds)
    index = held_index(trace.ticks, old, probe_seconds)[:ticks]
    zones = {
        name: ZoneTrace(
            zone.zone,
            zone.instance_type,
            tuple(int(v) for v in np.asarray(zone.available)[index]),
            tuple(float(p) for p in np.asarray(zone.prices)[index]),
            zone.on_demand_price,
            zone.gpus,
        )
        for name, zone in trace.zones.items()
    }
    return Trace(trace.start, timedelta(seconds=probe_seconds), zones)


# The grid of the cost benchmark's section (d): each axis away from a middle market, and the
# kinds of market the issue met (600 s probes; capacity almost always there at a third of
# on-demand; the same on an 8-GPU type).
FAMILIES = (
    MarketFamily("middle"),
    MarketFamily("probed every 600 s", probe_seconds=600.0),
    MarketFamily("probed every 60 s", probe_seconds=60.0),
    MarketFamily("scarce (50% up)", availability=0.5),
    MarketFamily("plentiful (99.5% up)", availability=0.995, mean_outage_hours=0.25),
    MarketFamily("bursty outages", burstiness=1.5),
    MarketFamily("long droughts", mean_outage_hours=12.0, burstiness=0.8),
    MarketFamily("flapping", mean_outage_hours=0.1),
    MarketFamily("shared outages", shared_outages=0.8),
    MarketFamily("dear spot (60% of on-demand)", price_ratio=0.6),
    MarketFamily("volatile prices", volatility=0.08),
    MarketFamily("plentiful, 8-GPU type", availability=0.995, mean_outage_hours=0.25, gpus=8),
    MarketFamily("middle, 8-GPU type", gpus=8),
)
