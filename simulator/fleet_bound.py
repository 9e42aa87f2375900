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
    on_demand = on_demand_per_gpu(trace, companions)
    return float(np.sum([job_bound(cheapest, job, start_tick, on_demand) for job in jobs]))


def on_demand_per_gpu(trace: Trace, companions: Companions) -> float:
    """The cheapest on-demand GPU-hour of the trace's type and its companions."""
    first = next(iter(trace.zones.values()))
    per_gpu = [
        p / c.kind.gpus for c in companions.types.values() for p in c.on_demand_price.values()
    ]
    return min([first.on_demand_price / first.gpus, *per_gpu])


def fleet_offline_optimum(
    trace: Trace,
    jobs: Sequence[SimJob],
    start_tick: int,
    companions: Companions,
    startup_seconds: float,
) -> float:
    """What an omniscient policy pays that knows the whole trace and pays every start-up
    (`startup_seconds`, rounded up to whole steps) and every wait for capacity (spot only where
    the trace has it, lost when it goes): the sum of each job's optimum, since the simulated
    cloud gives a zone with capacity as many instances as asked, so no job takes another's.
    Each GPU-hour is priced at the cheapest of the trace's type and its companions, as if the
    jobs always filled them (the bound's packing). What it leaves out, a fleet may still use:
    handing a booted GPU to the next job without a start-up.

    It is solved in steps of about ten minutes (`in_steps`: a step has spot only if every
    probe in it had, at the dearest price in it), so a week of 200 jobs takes seconds; that
    only raises what it pays."""
    stepped = in_steps(per_gpu_prices(trace, companions), OPTIMUM_STEP_SECONDS)
    k = round(stepped.gap / trace.gap)
    on_demand = on_demand_per_gpu(trace, companions)
    start = -(-start_tick // k)
    return float(
        np.sum([job_bound(stepped, job, start, on_demand, startup_seconds) for job in jobs])
    )


OPTIMUM_STEP_SECONDS = 600.0


def in_steps(trace: Trace, seconds: float) -> Trace:
    """The trace in steps of whole probes nearest `seconds`: up only where every probe in the
    step was, at the dearest price among them."""
    k = max(1, round(seconds / trace.gap.total_seconds()))
    if k == 1:
        return trace
    whole = trace.ticks // k * k
    zones = {}
    for name, zone in trace.zones.items():
        up = np.asarray(zone.available[:whole]).reshape(-1, k).min(axis=1)
        prices = np.asarray(zone.prices[:whole]).reshape(-1, k).max(axis=1)
        zones[name] = replace(
            zone,
            available=tuple(int(v) for v in up),
            prices=tuple(float(p) for p in prices),
        )
    return replace(trace, gap=trace.gap * k, zones=zones)
