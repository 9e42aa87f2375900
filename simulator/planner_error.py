"""How far the spot planner's expectation lies from what then happens: the error its guard
must exceed before it overrules the simple rule (issue 47, `PlannedMarketRule.min_saving`).

For a job arriving at some moment of a trace, the planner is asked as the autoscaler asks it
(a week of history in the autoscaler's own steps, the trace's prices then) and claims a saving:
what its moves are expected to cost against the simple rule's moves in the same model. Both
move sets are then replayed on what the trace did next (`replay`), in the planner's own grid,
so the realized saving is measured with nothing but the model's error between the two.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
import numpy.typing as npt

from autoscaler.market.quotes import MarketSnapshot, PoolQuote
from autoscaler.market.trace import Trace
from autoscaler.planned_market import HISTORY_STEP_SECONDS, PlannedMarketRule
from autoscaler.pools import Pool
from autoscaler.snapshot import JobDemand, PurchaseSettings
from autoscaler.spot_planner import Hold, Solution, run_ages
from autoscaler.throughput import WorkShape
from kernel.market import Market
from simulator.fleet_policies import seen_before
from simulator.market_families import held_index
from simulator.workload import SimJob

SHAPE = WorkShape("simulated/video", 64, 64, 9)


@dataclass(frozen=True)
class Claim:
    job_id: str
    claimed: float  # the saving the planner expected, a share of the simple rule's cost
    realized: float  # what the replay on the trace's own future saved, the same share

    @property
    def error(self) -> float:
        """By how much the planner over-claimed (negative: it saved more than it said)."""
        return self.claimed - self.realized


def replay(solution: Solution, capacity: npt.NDArray[np.int8]) -> float:
    """What `solution`'s moves cost on `capacity` (one value per step of its grid from the
    job's first step: 1 where spot could be had through the step), as `_solve` counts them."""
    p = solution.problem
    model = p.model
    ages = run_ages(capacity)
    hold, startup_left, done, cost = Hold.IDLE, 0, 0, 0.0
    prices = {Hold.ON_DEMAND: p.on_demand_cost, Hold.SPOT: p.spot_cost}
    for t in range(min(p.deadline, capacity.size)):
        if done >= p.work:
            break
        bucket = int(np.searchsorted(model.edges, ages[t], side="right") - 1)
        state = int(capacity[t]) * len(model.edges) + bucket
        if hold is Hold.SPOT and not capacity[t]:
            hold, startup_left = Hold.IDLE, 0  # reclaimed with its capacity
        move = solution.choose(t, done, hold, startup_left, state)
        if move is Hold.IDLE:
            hold, startup_left = Hold.IDLE, 0
            continue
        cost += prices[move]
        if move is not hold:
            startup_left = p.changeover  # a fresh instance
        hold = move
        if startup_left > 0:
            startup_left -= 1
        else:
            done += 1
    return cost


def claims(
    trace: Trace,
    jobs: Sequence[SimJob],
    start_tick: int,
    settings: PurchaseSettings,
) -> list[Claim]:
    """The planner's claim and the realized saving for each job whose simple rule takes spot
    at arrival (the only jobs the guard decides for)."""
    found = []
    for job in jobs:
        if job.deadline_hours is None:
            continue
        arrival = start_tick + round(job.arrival_hours * 3600 / trace.gap.total_seconds())
        if arrival >= trace.ticks:
            continue
        history = seen_before(trace, arrival, settings.candidate_types)
        now = trace.start + trace.gap * arrival
        history.record(_snapshot(trace, arrival))
        rule = PlannedMarketRule(history, min_saving=-np.inf)
        demand = JobDemand(
            job.job_id, 5, now, now + timedelta(hours=job.deadline_hours), SHAPE, 100
        )
        rule(demand, now, job.compute_hours * 3600, settings)
        plan = rule.plans.get(job.job_id)
        if plan is None:
            continue
        future = _future(trace, arrival, plan.grid.step_seconds)
        ours = replay(plan.solution, future)
        simple = replay(Solution(plan.solution.problem, simple=True), future)
        if simple > 0:
            found.append(Claim(job.job_id, plan.saving, (simple - ours) / simple))
    return found


def _snapshot(trace: Trace, tick: int) -> MarketSnapshot:
    quotes = {}
    for name, zone in trace.zones.items():
        spot = Pool(zone.instance_type, name, Market.SPOT)
        on_demand = Pool(zone.instance_type, name, Market.ON_DEMAND)
        quotes[spot] = PoolQuote(spot, zone.prices[tick], 0.0, bool(zone.available[tick]))
        quotes[on_demand] = PoolQuote(on_demand, zone.on_demand_price, 0.0)
    return MarketSnapshot(trace.start + trace.gap * tick, quotes)


def _future(trace: Trace, tick: int, step_seconds: float) -> npt.NDArray[np.int8]:
    """Some zone up, from `tick` on, in steps of `step_seconds`: a step is up only if every
    probe within it was (and its first probe's value holds until the next)."""
    up = np.array([z.available[tick:] for z in trace.zones.values()]).max(axis=0)
    held = up[held_index(up.size, trace.gap.total_seconds(), HISTORY_STEP_SECONDS)]
    per_step = max(1, round(step_seconds / HISTORY_STEP_SECONDS))
    whole = held.size // per_step * per_step
    return np.asarray(held[:whole].reshape(-1, per_step).min(axis=1), dtype=np.int8)
