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
from simulator.companions import Companions, no_companions
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


def job_bound(
    trace: Trace,
    job: SimJob,
    start_tick: int,
    on_demand_per_gpu: float,
    startup_seconds: float = 0.0,
) -> float:
    """The job's omniscient optimum from its arrival; with no start-up, its work rounded down
    (a bound), with one, rounded up and the start-up paid at each start (a cost an omniscient
    policy reaches)."""
    tick_hours = trace.gap.total_seconds() / 3600
    arrival = start_tick + math.ceil(job.arrival_hours / tick_hours)
    window = job.deadline_hours if job.deadline_hours is not None else WEEK_HOURS
    horizon = min(math.floor(window / tick_hours), trace.ticks - arrival)
    reached = startup_seconds > 0
    compute = job.compute_hours / tick_hours
    work = max(1, math.ceil(compute - 1e-9) if reached else math.floor(compute))
    changeover = math.ceil(startup_seconds / 3600 / tick_hours - 1e-9)
    if horizon < work + changeover:
        return (work + changeover) * tick_hours * on_demand_per_gpu
    setup = Setup(
        work=work,
        deadline=horizon,
        changeover=changeover,
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


def fleet_reachable(
    trace: Trace, jobs: Sequence[SimJob], start_tick: int, startup_seconds: float
) -> float:
    """What an omniscient policy pays that runs each job on GPUs of the trace's own type, in
    any zone, paying every start-up (`startup_seconds`, ticks rounded up) and taking spot only
    where the trace has capacity: the sum of each job's optimum, since the simulated cloud
    gives a zone with capacity as many instances as asked (no job takes another's). A fleet
    policy may pay less only by what this leaves out: packing jobs onto a multi-GPU companion
    that is cheaper per GPU, handing a booted GPU to the next job, or finishing work inside a
    tick. On a multi-GPU trace it prices a GPU as if bought alone, which no policy can."""
    own = per_gpu_prices(trace, no_companions(trace))
    first = next(iter(own.zones.values()))
    return float(
        np.sum(
            [
                job_bound(own, job, start_tick, first.on_demand_price, startup_seconds)
                for job in jobs
            ]
        )
    )
