"""The synthetic markets have the structure their names promise, and every policy runs on them
with the parameters it has for the real traces, meeting every deadline."""

from __future__ import annotations

import numpy as np

from autoscaler.spot_planner import run_ages
from simulator.study import StudyConfig, run_study
from simulator.synthetic import HOUR, MARKETS, ON_DEMAND, synthetic_trace


def runs(kind: str, value: int) -> np.ndarray:
    """Lengths (ticks) of the runs of `value` in every zone of that market."""
    lengths = []
    for zone in synthetic_trace(kind).zones.values():
        series = np.array(zone.available, dtype=np.int8)
        ages = run_ages(series)
        ends = np.flatnonzero(np.diff(series) != 0)
        lengths += [int(ages[e]) + 1 for e in ends if series[e] == value]
    return np.array(lengths)


def test_each_market_has_its_structure() -> None:
    periodic = synthetic_trace("periodic outages")
    for zone in periodic.zones.values():
        assert abs(np.mean(zone.available) - 0.75) < 0.01  # 18 h of every 24
    assert np.median(runs("long droughts", 0)) > 8 * HOUR
    assert np.median(runs("flapping zones", 1)) < 0.5 * HOUR
    spiky = synthetic_trace("price spikes")
    prices = np.array([z.prices for z in spiky.zones.values()])
    assert prices.max() > 1.8 * np.median(prices)
    assert prices.max() <= ON_DEMAND


def test_every_policy_meets_every_deadline_on_every_synthetic_market() -> None:
    config = StudyConfig(compute_hours=12, job_fraction=0.8, starts_per_zone=1, multi_zone_starts=1)
    for kind in MARKETS:
        for multi_zone in (False, True):
            summaries, _ = run_study(synthetic_trace(kind), config, multi_zone)
            assert all(s.misses == 0 for s in summaries), (kind, multi_zone)
            optimum = min(s.mean_cost for s in summaries)
            assert all(s.gap_to_optimum >= -1e-9 for s in summaries), kind
            assert optimum > 0
