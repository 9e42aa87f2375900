"""Issue 16's targets, each read off the benchmark's results as met, or short by how much."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from simulator.fleet_policies import FAIR_BASELINES
from simulator.results import FleetResult
from simulator.study import PolicySummary


@dataclass(frozen=True)
class Target:
    setting: str
    goal: str
    measured: str
    met: bool
    short_by: str = ""


def study_target(
    setting: str, summaries: Sequence[PolicySummary], ours: str, baselines: Sequence[str]
) -> Target:
    """Gap to the optimum at most half of the better baseline's, with no deadline missed."""
    rows = {s.policy: s for s in summaries}
    best = min((rows[name] for name in baselines), key=lambda s: s.gap_to_optimum)
    goal_gap = best.gap_to_optimum / 2
    mine = rows[ours]
    met = mine.gap_to_optimum <= goal_gap and mine.misses == 0
    short = "" if met else f"{(mine.gap_to_optimum - goal_gap) * 100:.1f} points of gap"
    if mine.misses:
        short = f"{mine.misses} deadline misses"
    return Target(
        setting,
        f"gap <= half of {best.policy}'s ({best.gap_to_optimum:+.1%}): "
        f"<= {goal_gap:+.1%}, 0 misses",
        f"{ours}: {mine.gap_to_optimum:+.1%}, {mine.misses} misses",
        met,
        short,
    )


def fleet_targets(
    setting: str,
    results: Sequence[FleetResult],
    bound: float | None = None,
    ours: str = "framefleet",
) -> list[Target]:
    """At least 10% below the best fair baseline, at least 60% below on-demand only, 0 misses;
    with the lower bound no policy can beat, how far below the baseline anything could be."""
    rows = {r.policy: r for r in results}
    mine = rows[ours]
    best = min((rows[name] for name in FAIR_BASELINES if name in rows), key=lambda r: r.cost)
    on_demand = rows["on-demand only"]
    below_best = 1 - mine.cost / best.cost
    below_on_demand = 1 - mine.cost / on_demand.cost
    possible = (
        "" if bound is None else (f" (the lower bound is {1 - bound / best.cost:.1%} below it)")
    )
    return [
        Target(
            setting,
            f">= 10% below {best.policy}, 0 misses",
            f"{below_best:.1%} below, {mine.misses} misses{possible}",
            below_best >= 0.10 and mine.misses == 0,
            "" if below_best >= 0.10 else f"{(0.10 - below_best) * 100:.1f} points",
        ),
        Target(
            setting,
            ">= 60% below on-demand only",
            f"{below_on_demand:.1%} below",
            below_on_demand >= 0.60,
            "" if below_on_demand >= 0.60 else f"{(0.60 - below_on_demand) * 100:.1f} points",
        ),
    ]
