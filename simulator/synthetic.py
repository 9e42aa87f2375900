"""Synthetic spot markets with known structure, so a policy tuned to one real trace shows it:
every policy runs on them with the parameters it has for the real traces.

- periodic: each zone has capacity 18 h of every 24 h, the zones' outages staggered;
- droughts: capacity comes and goes with long, heavy-tailed outages (lognormal, median 12 h);
- price spikes: capacity almost always, the price jumping to 2-3x for an hour or three;
- flapping: capacity flips every few minutes to half an hour.

Same tick (195 s), on-demand price (3.06 USD/hour) and length (18 days) as the V100 traces.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import numpy as np
import numpy.typing as npt

from autoscaler.market.trace import DEFAULT_START, Trace, ZoneTrace

TICK = timedelta(seconds=195)
TICKS = 8000  # 18 days
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
ON_DEMAND = 3.06
BASE_PRICE = 0.92
HOUR = 3600 / TICK.total_seconds()  # ticks per hour

Series = npt.NDArray[np.int8]


def _runs(rng: np.random.Generator, up: Callable[[], float], down: Callable[[], float]) -> Series:
    """Alternating up and down runs (lengths in ticks) until the trace is full."""
    values: list[int] = []
    state = int(rng.integers(0, 2))
    while len(values) < TICKS:
        length = max(1, round(up() if state else down()))
        values.extend([state] * length)
        state = 1 - state
    return np.array(values[:TICKS], dtype=np.int8)


def _steady_prices(rng: np.random.Generator) -> npt.NDArray[np.float64]:
    """Hourly prices drifting a few percent around the base, as the V100 traces' do."""
    hours = TICKS // int(HOUR) + 2
    hourly = BASE_PRICE * (1 + np.cumsum(rng.normal(0, 0.005, hours)).clip(-0.08, 0.08))
    return np.repeat(hourly, int(HOUR))[:TICKS]


def periodic(rng: np.random.Generator, zone: int) -> tuple[Series, npt.NDArray[np.float64]]:
    day = int(24 * HOUR)
    phase = zone * day // len(ZONES)
    ticks = (np.arange(TICKS) + phase) % day
    return (ticks < int(18 * HOUR)).astype(np.int8), _steady_prices(rng)


def droughts(rng: np.random.Generator, zone: int) -> tuple[Series, npt.NDArray[np.float64]]:
    series = _runs(
        rng, lambda: rng.exponential(10 * HOUR), lambda: rng.lognormal(np.log(12 * HOUR), 0.8)
    )
    return series, _steady_prices(rng)


def price_spikes(rng: np.random.Generator, zone: int) -> tuple[Series, npt.NDArray[np.float64]]:
    series = _runs(rng, lambda: rng.exponential(40 * HOUR), lambda: rng.exponential(0.5 * HOUR))
    prices = _steady_prices(rng)
    for start in rng.integers(0, TICKS, 12):
        length = int(rng.uniform(1, 3) * HOUR)
        prices[start : start + length] *= rng.uniform(2.0, 3.0)
    return series, np.minimum(prices, ON_DEMAND)


def flapping(rng: np.random.Generator, zone: int) -> tuple[Series, npt.NDArray[np.float64]]:
    series = _runs(rng, lambda: rng.exponential(0.4 * HOUR), lambda: rng.exponential(0.2 * HOUR))
    return series, _steady_prices(rng)


MARKETS = {
    "periodic outages": periodic,
    "long droughts": droughts,
    "price spikes": price_spikes,
    "flapping zones": flapping,
}


def synthetic_trace(kind: str, seed: int = 16) -> Trace:
    make = MARKETS[kind]
    rng = np.random.default_rng(seed)
    zones = {}
    for index, zone in enumerate(ZONES):
        available, prices = make(rng, index)
        zones[zone] = ZoneTrace(
            zone,
            "p3.2xlarge",
            tuple(int(v) for v in available),
            tuple(float(p) for p in prices),
            ON_DEMAND,
            1,
        )
    return Trace(DEFAULT_START, TICK, zones)
