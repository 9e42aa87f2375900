"""Setting (a) of the cost benchmark: the paper's single job on the V100 traces, many start
times per zone, every policy on the same slices of the trace."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from autoscaler.market.trace import Trace
from kernel.errors import ConfigurationError
from simulator.framefleet_policy import FrameFleetPolicy
from simulator.model_policy import ModelPolicy
from simulator.omniscient import omniscient
from simulator.single_job import (
    Greedy,
    GreedyAnyZone,
    MarketWindow,
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


def ticks_up(hours: float, tick_hours: float) -> int:
    """Whole ticks covering `hours`, rounded up as the paper's model does (a start-up of 0.2 h
    on 600 s ticks takes 2 ticks, not 1)."""
    return math.ceil(hours / tick_hours - 1e-9)


def setup_for(trace: Trace, config: StudyConfig) -> Setup:
    types = {z.instance_type for z in trace.zones.values()}
    if len(types) != 1:
        raise ConfigurationError(f"the single-job study needs one instance type, not {types}")
    tick_hours = trace.gap.total_seconds() / 3600
    work = ticks_up(config.compute_hours, tick_hours)
    price = trace.on_demand_price(types.pop())
    assert price is not None  # load_trace gives every zone one
    return Setup(
        work=work,
        deadline=math.floor(work / config.job_fraction),
        changeover=ticks_up(config.changeover_hours, tick_hours),
        tick_hours=tick_hours,
        on_demand_price=price,
    )


def market_from(trace: Trace, start: int, length: int, history_ticks: int = 3000) -> MarketWindow:
    """The trace from `start` for `length` ticks, and up to `history_ticks` before it (the
    record a live system has when the job arrives)."""
    zones = sorted(trace.zones)
    available = np.array(
        [trace.zones[z].available[start : start + length] for z in zones], dtype=np.int8
    )
    price = np.array([trace.zones[z].prices[start : start + length] for z in zones])
    first = max(0, start - history_ticks)
    history = np.array([trace.zones[z].available[first:start] for z in zones], dtype=np.int8)
    return MarketWindow(tuple(zones), available, price, history.reshape(len(zones), start - first))


Runner = Callable[[Setup, MarketWindow], Outcome]


def online(policy: Policy) -> Runner:
    return lambda setup, market: simulate(policy, setup, market)


def single_zone_policies(zone: int) -> dict[str, Runner]:
    return {
        "on-demand only": online(OnDemandOnly()),
        "greedy": online(Greedy(zone)),
        "uniform progress": online(UniformProgress(zone)),
        "framefleet (1 zone)": online(FrameFleetPolicy([zone], "framefleet (1 zone)")),
        "framefleet planner (1 zone)": online(ModelPolicy([zone])),
        "omniscient (1 zone)": lambda setup, market: omniscient(setup, market, [zone]),
    }


def multi_zone_policies(zones: int) -> dict[str, Runner]:
    """The fair baselines move across the same zones as FrameFleet."""
    everywhere = list(range(zones))
    label = f"({zones} zones)"
    policies: list[Policy] = [
        OnDemandOnly(),
        GreedyAnyZone(everywhere),
        UniformProgress(everywhere),
        FrameFleetPolicy(everywhere, f"framefleet {label}"),
        ModelPolicy(everywhere),
    ]
    runners = {policy.name: online(policy) for policy in policies}
    runners[f"omniscient {label}"] = lambda s, m: omniscient(s, m)
    return runners


def optimum_name(zones: int | None) -> str:
    return "omniscient (1 zone)" if zones is None else f"omniscient ({zones} zones)"


Case = tuple[int | None, int]  # (the zone, or None for all zones; the start tick)
_shared: tuple[Trace, Setup] | None = None


def _share(trace: Trace, setup: Setup) -> None:
    global _shared
    _shared = (trace, setup)


def run_case(case: Case) -> dict[str, Outcome]:
    """Every policy of the setting on one slice of the trace (in a worker process)."""
    assert _shared is not None
    trace, setup = _shared
    zone, start = case
    market = market_from(trace, start, setup.deadline)
    runners = multi_zone_policies(len(trace.zones)) if zone is None else single_zone_policies(zone)
    return {name: runner(setup, market) for name, runner in runners.items()}


def run_study(
    trace: Trace, config: StudyConfig, multi_zone: bool = False, workers: int = 1
) -> tuple[list[PolicySummary], dict[str, list[Outcome]]]:
    setup = setup_for(trace, config)
    rng = np.random.default_rng(config.seed)
    last_start = trace.ticks - setup.deadline
    cases: list[Case]
    if multi_zone:
        cases = [(None, int(s)) for s in rng.integers(0, last_start, config.multi_zone_starts)]
        optimum = optimum_name(len(trace.zones))
    else:
        cases = [
            (zone, int(s))
            for zone in range(len(trace.zones))
            for s in rng.integers(0, last_start, config.starts_per_zone)
        ]
        optimum = optimum_name(None)
    if workers > 1:
        with ProcessPoolExecutor(workers, initializer=_share, initargs=(trace, setup)) as pool:
            results = list(pool.map(run_case, cases, chunksize=4))
    else:
        _share(trace, setup)
        results = [run_case(case) for case in cases]
    outcomes: dict[str, list[Outcome]] = defaultdict(list)
    for result in results:
        for name, outcome in result.items():
            outcomes[name].append(outcome)
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
