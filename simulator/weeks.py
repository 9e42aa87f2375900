"""Many fleet weeks at once: each policy's cost against the lower bound no policy can beat
(`simulator/fleet_bound.py`), as a mean and a spread over the weeks, with its misses, and how
much of the strongest fair baseline's gap to the bound FrameFleet closes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from rich.table import Table

from simulator.fleet_policies import FAIR_BASELINES
from simulator.report import policy_table
from simulator.results import FleetResult
from simulator.targets import Target


@dataclass(frozen=True)
class Week:
    label: str
    results: tuple[FleetResult, ...]
    bound: float  # USD no policy can pay less than

    def cost(self, policy: str) -> float:
        return next(r.cost for r in self.results if r.policy == policy)

    def best_fair(self) -> FleetResult:
        fair = [r for r in self.results if r.policy in FAIR_BASELINES]
        return min(fair, key=lambda r: r.cost)

    def closed(self, ours: str) -> float:
        """The share of the best fair baseline's gap to the bound that `ours` closes (1: it
        pays the bound; 0: the baseline's cost; below 0: dearer than the baseline)."""
        baseline = self.best_fair().cost
        gap = baseline - self.bound
        return (baseline - self.cost(ours)) / gap if gap > 0 else 0.0


@dataclass(frozen=True)
class PolicyWeeks:
    policy: str
    weeks: int
    mean_cost: float
    over_bound_mean: float  # cost / bound - 1, the mean over the weeks
    over_bound_sd: float
    over_bound_min: float
    over_bound_max: float
    misses: int
    cheaper_than_best_fair: int  # weeks it paid less than that week's best fair baseline


def summarize_weeks(weeks: Sequence[Week]) -> list[PolicyWeeks]:
    policies = [r.policy for r in weeks[0].results]
    rows = []
    for policy in policies:
        costs = np.array([w.cost(policy) for w in weeks])
        over = costs / np.array([w.bound for w in weeks]) - 1
        rows.append(
            PolicyWeeks(
                policy,
                len(weeks),
                float(costs.mean()),
                float(over.mean()),
                float(over.std(ddof=1)) if len(weeks) > 1 else 0.0,
                float(over.min()),
                float(over.max()),
                sum(next(r.misses for r in w.results if r.policy == policy) for w in weeks),
                sum(w.cost(policy) < w.best_fair().cost for w in weeks),
            )
        )
    return sorted(rows, key=lambda r: r.mean_cost)


def weeks_table(title: str, rows: Sequence[PolicyWeeks]) -> Table:
    table = policy_table(
        title,
        "weeks",
        "mean cost",
        "over the bound: mean ± sd",
        "min / max",
        "misses",
        "weeks below the best fair baseline",
    )
    for r in rows:
        table.add_row(
            r.policy,
            str(r.weeks),
            f"${r.mean_cost:,.2f}",
            f"{r.over_bound_mean:+.1%} ± {r.over_bound_sd:.1%}",
            f"{r.over_bound_min:+.1%} / {r.over_bound_max:+.1%}",
            str(r.misses),
            str(r.cheaper_than_best_fair),
        )
    return table


def weeks_target(setting: str, weeks: Sequence[Week], ours: str = "framefleet") -> Target:
    """Issue 32: cost - bound <= 0.5 x (best fair baseline - bound), on the weeks' mean, with no
    deadline missed."""
    closed = [w.closed(ours) for w in weeks]
    mean = float(np.mean(closed))
    misses = sum(next(r.misses for r in w.results if r.policy == ours) for w in weeks)
    met = mean >= 0.5 and misses == 0
    return Target(
        setting,
        "close >= 50% of the best fair baseline's gap to the lower bound, 0 misses",
        f"closed {mean:.1%} on the mean (weeks: {min(closed):.1%} to {max(closed):.1%}), "
        f"{misses} misses",
        met,
        "" if met else f"{(0.5 - mean) * 100:.1f} points of the gap",
    )
