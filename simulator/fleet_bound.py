"""A lower bound on what any policy could pay for a fleet workload, to judge a fleet target
against what is possible at all.

Each job alone, with the omniscient optimum of the single-job setting (`omniscient.py`):
- it knows the whole trace;
- it pays no start-up (a job may land on a GPU that is already booted with its model loaded);
- it pays per GPU the cheapest of the trace's type and the multi-GPU companions (as if every
  companion were always full);
- it runs from its arrival to its deadline (without a deadline: to the end of the week);
- jobs never compete for capacity.
Every one of those only lowers the cost, so no fleet policy, online or not, pays less than the
sum. (It is not reachable: real jobs pay start-ups and idle minutes, and wait for capacity.)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from autoscaler.market.trace import Trace
from autoscaler.pools import Pool
from kernel.market import Market as MarketKind
from simulator.companions import Companions
from simulator.omniscient import omniscient
from simulator.single_job import Setup
from simulator.study import market_from
from simulator.workload import SimJob

WEEK_HOURS = 7 * 24.0


def per_gpu_prices(trace: Trace, companions: Companions) -> Trace:
    """The trace with each zone's spot price per GPU (the traced instance's price over its
    GPUs) at the cheapest of its types, as a one-GPU trace: a job of one GPU pays for one."""
    zones = {}
    for name, zone in trace.zones.items():
        factors = [1.0]
        for companion in companions.types.values():
            region = Pool(zone.instance_type, name, MarketKind.SPOT).region
            if region in companion.spot_factor:
                factors.append(companion.spot_factor[region] / companion.kind.gpus * zone.gpus)
        prices = tuple(p * min(factors) / zone.gpus for p in zone.prices)
        on_demand = zone.on_demand_price / zone.gpus
        zones[name] = replace(zone, prices=prices, on_demand_price=on_demand, gpus=1)
    return replace(trace, zones=zones)


def job_bound(trace: Trace, job: SimJob, start_tick: int, on_demand_per_gpu: float) -> float:
    tick_hours = trace.gap.total_seconds() / 3600
    arrival = start_tick + math.ceil(job.arrival_hours / tick_hours)
    window = job.deadline_hours if job.deadline_hours is not None else WEEK_HOURS
    horizon = min(math.floor(window / tick_hours), trace.ticks - arrival)
    work = max(1, math.floor(job.compute_hours / tick_hours))  # rounded down: a bound
    if horizon < work:
        return work * tick_hours * on_demand_per_gpu
    setup = Setup(
        work=work,
        deadline=horizon,
        changeover=0,
        tick_hours=tick_hours,
        on_demand_price=on_demand_per_gpu,
    )
    outcome = omniscient(setup, market_from(trace, arrival, horizon, history_ticks=0))
    return float(outcome.cost)


def fleet_lower_bound(
    trace: Trace, jobs: Sequence[SimJob], start_tick: int, companions: Companions
) -> float:
    cheapest = per_gpu_prices(trace, companions)
    first = next(iter(trace.zones.values()))
    per_gpu = [
        p / c.kind.gpus for c in companions.types.values() for p in c.on_demand_price.values()
    ]
    on_demand = min([first.on_demand_price / first.gpus, *per_gpu])
    return float(np.sum([job_bound(cheapest, job, start_tick, on_demand) for job in jobs]))
