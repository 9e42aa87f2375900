"""Setting (a) of the cost benchmark: the paper's single job on the V100 traces, many start
times per zone, every policy on the same slices of the trace."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from autoscaler.market.trace import ON_DEMAND_PRICES, Trace
from simulator.framefleet_policy import FrameFleetPolicy
from simulator.omniscient import omniscient
from simulator.single_job import (
    Greedy,
    Market,
    OnDemandOnly,
    Outcome,
    Policy,
    Setup,
    UniformProgress,
    simulate,
)


@dataclass(frozen=True)
class StudyConfig:
    compute_hours: float = 48.0
    changeover_hours: float = 0.2
    job_fraction: float = 0.8  # compute / time to deadline
    starts_per_zone: int = 100
    multi_zone_starts: int = 100
    seed: int = 2024


@dataclass(frozen=True)
class PolicySummary:
    policy: str
    runs: int
    mean_cost: float
    cost_vs_on_demand: float  # mean cost / on-demand-only mean cost on the same runs
    gap_to_optimum: float  # mean cost / omniscient mean cost - 1
    on_demand_hours: float
    spot_hours: float
    misses: int


def setup_for(trace: Trace, config: StudyConfig) -> Setup:
    tick_hours = trace.gap.total_seconds() / 3600
    work = math.ceil(config.compute_hours / tick_hours)
    return Setup(
        work=work,
        deadline=math.floor(work / config.job_fraction),
        changeover=round(config.changeover_hours / tick_hours),
        tick_hours=tick_hours,
        on_demand_price=ON_DEMAND_PRICES["p3.2xlarge"],
    )


def market_from(trace: Trace, start: int, length: int) -> Market:
    zones = sorted(trace.zones)
    available = np.array(
        [trace.zones[z].available[start : start + length] for z in zones], dtype=np.int8
    )
    price = np.array([trace.zones[z].prices[start : start + length] for z in zones])
    return Market(tuple(zones), available, price)


Runner = Callable[[Setup, Market], Outcome]


def single_zone_policies(zone: int) -> dict[str, Runner]:
    def online(policy: Policy) -> Runner:
        return lambda setup, market: simulate(policy, setup, market)

    return {
        "on-demand only": online(OnDemandOnly()),
        "greedy": online(Greedy(zone)),
        "uniform progress": online(UniformProgress(zone)),
        "framefleet (1 zone)": online(FrameFleetPolicy([zone], "framefleet (1 zone)")),
        "omniscient (1 zone)": lambda setup, market: omniscient(setup, market, [zone]),
    }


def multi_zone_policies(zones: int) -> dict[str, Runner]:
    everywhere = list(range(zones))
    return {
        "on-demand only": lambda s, m: simulate(OnDemandOnly(), s, m),
        "framefleet (9 zones)": lambda s, m: simulate(
            FrameFleetPolicy(everywhere, "framefleet (9 zones)"), s, m
        ),
        "omniscient (9 zones)": lambda s, m: omniscient(s, m),
    }


def run_study(
    trace: Trace, config: StudyConfig, multi_zone: bool = False
) -> tuple[list[PolicySummary], dict[str, list[Outcome]]]:
    setup = setup_for(trace, config)
    rng = np.random.default_rng(config.seed)
    last_start = trace.ticks - setup.deadline
    outcomes: dict[str, list[Outcome]] = defaultdict(list)
    if multi_zone:
        for start in rng.integers(0, last_start, config.multi_zone_starts):
            market = market_from(trace, int(start), setup.deadline)
            for name, runner in multi_zone_policies(len(trace.zones)).items():
                outcomes[name].append(runner(setup, market))
        optimum = "omniscient (9 zones)"
    else:
        for zone in range(len(trace.zones)):
            for start in rng.integers(0, last_start, config.starts_per_zone):
                market = market_from(trace, int(start), setup.deadline)
                for name, runner in single_zone_policies(zone).items():
                    outcomes[name].append(runner(setup, market))
        optimum = "omniscient (1 zone)"
    return summarize(outcomes, optimum), dict(outcomes)


def summarize(outcomes: dict[str, list[Outcome]], optimum: str) -> list[PolicySummary]:
    on_demand = float(np.mean([o.cost for o in outcomes["on-demand only"]]))
    best = float(np.mean([o.cost for o in outcomes[optimum]]))
    summaries = []
    for name, runs in outcomes.items():
        mean = float(np.mean([o.cost for o in runs]))
        summaries.append(
            PolicySummary(
                name,
                len(runs),
                mean,
                mean / on_demand,
                mean / best - 1,
                float(np.mean([o.on_demand_hours for o in runs])),
                float(np.mean([o.spot_hours for o in runs])),
                sum(1 for o in runs if not o.met_deadline),
            )
        )
    return summaries
