"""Setting (b): a fleet of video jobs over days of a real trace, all zones at once.

FrameFleet's run drives the product's own purchase policy (`autoscaler.policy.plan`, the
function the live loop calls) over the trace-driven market (`TraceMarket`, the live loop's
market port) on an injected clock, tick by tick: spot instances vanish when their zone's
availability drops (their job goes back to the queue with its progress), and each queued job
gets what `plan` decides. The baselines run each job on its own with the single-job simulator.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field
from datetime import timedelta

from autoscaler.market.trace import ON_DEMAND_PRICES, Trace, TraceMarket
from autoscaler.policy import plan
from autoscaler.pools import Market as Purchase
from autoscaler.pools import Pool
from autoscaler.simulation.single_job import (
    Greedy,
    Market,
    OnDemandOnly,
    Policy,
    Setup,
    UniformProgress,
    simulate,
)
from autoscaler.simulation.study import market_from
from autoscaler.simulation.workload import SimJob
from autoscaler.snapshot import InstanceView, JobDemand, PlanInput, PurchaseSettings
from autoscaler.throughput import ThroughputModel, WorkShape
from orchestrator.domain.clock import FakeClock

# One "step" of a simulated job is one tick of compute on the trace's GPU.
SHAPE = WorkShape("simulated", 1000, 1000, 1)
INSTANCE_TYPE = "p3.2xlarge"
PLANNER = plan  # the live loop's policy function; a test checks they are the same object


@dataclass(frozen=True)
class FleetResult:
    policy: str
    cost: float
    spot_hours: float
    on_demand_hours: float
    misses: int
    unfinished: int
    per_job_cost: dict[str, float] = field(default_factory=dict)


@dataclass
class _Running:
    job: SimJob
    pool: Pool
    instance_id: str
    warming: int


def ticks(hours: float, trace: Trace) -> int:
    return math.ceil(hours * 3600 / trace.gap.total_seconds())


def settings_for(trace: Trace, changeover: int) -> PurchaseSettings:
    tick = trace.gap.total_seconds()
    return PurchaseSettings(
        candidate_types=(INSTANCE_TYPE,),
        budget_per_hour=1e9,
        budget_per_day=1e9,
        boot_seconds=changeover * tick,
        model_load_seconds=0.0,
        checkpoint_interval_seconds=tick,  # a notice costs at most the tick in flight
        idle_timeout=timedelta(0),
        max_launches=10_000,
    )


async def run_framefleet(
    trace: Trace, jobs: list[SimJob], changeover: int, start_tick: int = 0
) -> FleetResult:
    tick_seconds = trace.gap.total_seconds()
    tick_hours = tick_seconds / 3600
    clock = FakeClock(trace.start + trace.gap * start_tick)
    market = TraceMarket(trace, clock)
    pools = market.pools()
    settings = settings_for(trace, changeover)
    model = ThroughputModel(priors={"v100": tick_seconds})
    by_id = {j.job_id: j for j in jobs}
    arrival = {j.job_id: start_tick + ticks(j.arrival_hours, trace) for j in jobs}
    work = {j.job_id: ticks(j.compute_hours, trace) for j in jobs}
    deadline = {
        j.job_id: arrival[j.job_id] + ticks(j.deadline_hours, trace)
        for j in jobs
        if j.deadline_hours is not None
    }
    done = dict.fromkeys(work, 0)
    finished: dict[str, int] = {}
    running: dict[str, _Running] = {}
    per_job = dict.fromkeys(work, 0.0)
    spot_hours = on_demand_hours = 0.0
    launches = 0
    for t in range(start_tick, trace.ticks):
        if len(finished) == len(jobs):
            break
        clock_at = trace.start + trace.gap * t
        clock.advance((clock_at - clock.now()).total_seconds())
        snapshot = await market.snapshot(pools)
        for job_id, run in list(running.items()):
            quote = snapshot.quote(run.pool)
            if run.pool.market is Purchase.SPOT and (quote is None or not quote.available):
                del running[job_id]  # interrupted: back to the queue with its progress
        queued = [
            _demand(j, arrival[j.job_id], deadline.get(j.job_id), work, done, trace)
            for j in jobs
            if arrival[j.job_id] <= t and j.job_id not in finished and j.job_id not in running
        ]
        if queued:
            views = tuple(
                InstanceView(r.instance_id, r.pool, 0.0, clock_at, 1, busy_gpus=1,
                             unsaved_work=True)
                for r in running.values()
            )  # fmt: skip
            decided = PLANNER(PlanInput(clock_at, tuple(queued), views, snapshot), settings, model)
            for launch in decided.launches:
                for job_id in launch.job_ids:
                    launches += 1
                    running[job_id] = _Running(by_id[job_id], launch.pool, f"i-{launches}",
                                               changeover)  # fmt: skip
        for job_id, run in running.items():
            quote = snapshot.quote(run.pool)
            price = quote.price_per_hour if quote else ON_DEMAND_PRICES[INSTANCE_TYPE]
            per_job[job_id] += price * tick_hours
            if run.pool.market is Purchase.SPOT:
                spot_hours += tick_hours
            else:
                on_demand_hours += tick_hours
            if run.warming > 0:
                run.warming -= 1
            else:
                done[job_id] += 1
        for job_id in [j for j, r in running.items() if done[j] >= work[j]]:
            finished[job_id] = t + 1
            del running[job_id]  # the idle instance is terminated at once (idle timeout 0)
    misses = sum(1 for job_id, due in deadline.items() if finished.get(job_id, math.inf) > due)
    return FleetResult(
        "framefleet", sum(per_job.values()), spot_hours, on_demand_hours, misses,
        len(jobs) - len(finished), per_job,
    )  # fmt: skip


def _demand(
    job: SimJob,
    arrived: int,
    due: int | None,
    work: dict[str, int],
    done: dict[str, int],
    trace: Trace,
) -> JobDemand:
    return JobDemand(
        job.job_id,
        job.priority,
        trace.start + trace.gap * arrived,
        None if due is None else trace.start + trace.gap * due,
        SHAPE,
        work[job.job_id],
        done[job.job_id],
        min_vram_gib=16,
        families=frozenset({"v100"}),
    )


def run_baseline(
    name: str, trace: Trace, jobs: list[SimJob], changeover: int, start_tick: int = 0
) -> FleetResult:
    """Each job alone, from its arrival, in its home zone: the cheapest zone with capacity
    when it arrives (the first zone if none has)."""
    whole = market_from(trace, 0, trace.ticks)
    available, price = whole.available, whole.price
    tick_hours = trace.gap.total_seconds() / 3600
    cost = spot = on_demand = 0.0
    misses = unfinished = 0
    per_job = {}
    for job in jobs:
        begin = start_tick + ticks(job.arrival_hours, trace)
        work = ticks(job.compute_hours, trace)
        window = ticks(job.deadline_hours, trace) if job.deadline_hours else 4 * work + 48
        window = min(window, trace.ticks - begin)
        open_zones = [z for z in range(len(whole.zones)) if available[z, begin]]
        home = min(open_zones, key=lambda z: price[z, begin]) if open_zones else 0
        policy: Policy = OnDemandOnly()
        if name == "greedy":
            policy = Greedy(home)
        elif name == "uniform progress":
            policy = UniformProgress(home)
        setup = Setup(work, window, changeover, tick_hours, ON_DEMAND_PRICES[INSTANCE_TYPE])
        market = Market(whole.zones, available[:, begin : begin + window],
                        price[:, begin : begin + window])  # fmt: skip
        outcome = simulate(policy, setup, market)
        cost += outcome.cost
        spot += outcome.spot_hours
        on_demand += outcome.on_demand_hours
        per_job[job.job_id] = outcome.cost
        if not outcome.met_deadline:
            if job.deadline_hours is None:
                unfinished += 1
            else:
                misses += 1
    return FleetResult(name, cost, spot, on_demand, misses, unfinished, per_job)


BASELINES = ("on-demand only", "greedy", "uniform progress")


def compare_fleet(
    trace: Trace, jobs: list[SimJob], changeover_hours: float, start_hours: float = 0.0
) -> list[FleetResult]:
    """FrameFleet and every baseline on the same jobs and stretch of the trace, cheapest first."""
    tick_hours = trace.gap.total_seconds() / 3600
    changeover = round(changeover_hours / tick_hours)
    start = round(start_hours / tick_hours)
    results = [asyncio.run(run_framefleet(trace, jobs, changeover, start))]
    results += [run_baseline(name, trace, jobs, changeover, start) for name in BASELINES]
    return sorted(results, key=lambda r: r.cost)
