"""FrameFleet's model-based spot rule in the single-job setting: the product's `SpotPlanner`
(autoscaler/spot_planner.py) decides idle, spot or on-demand from a capacity model of the
job's zone learned from the past alone (the zone's recorded history before the job and what
the job has seen since); across zones it models the cheapest zone with capacity."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from autoscaler.planned_market import MODEL_EDGES
from autoscaler.spot_planner import CapacityModel, Hold, PlanGrid, PlanProblem, SpotPlanner, coarsen
from simulator.single_job import Action, MarketWindow, Mode, Setup, SingleJobState, paper_safety_net

# How much of the past the estimate reads: long enough to have seen droughts, short enough to
# follow a zone whose behaviour changes.
LOOKBACK_TICKS = 3000  # 6.8 days at the traces' 195 s


# The decision table's bound (the autoscaler's, `PlannedMarketRule.budget_bytes` is 8 MiB per
# job; one job alone may take more): finer ticks are planned on a coarser grid.
BUDGET_BYTES = 256 * 2**20

HOLD_OF_MODE = {Mode.IDLE: Hold.IDLE, Mode.ON_DEMAND: Hold.ON_DEMAND, Mode.SPOT: Hold.SPOT}


class ModelPolicy:
    def __init__(
        self, zones: Sequence[int], name: str | None = None, budget_bytes: int = BUDGET_BYTES
    ) -> None:
        self.budget_bytes = budget_bytes
        self.zones = list(zones)
        self.name = name or f"framefleet planner ({_where(self.zones)})"
        self.planner = SpotPlanner()

    def act(self, state: SingleJobState, setup: Setup, market: MarketWindow) -> Action:
        grid = _grid(setup, self.budget_bytes)
        k = grid.ticks_per_step
        if k > 1 and paper_safety_net(state, setup):
            # On the trace's own ticks the program keeps the deadline by construction; on a
            # coarser grid its rounding might not, so the paper's safety net stays beneath it.
            return Action(Mode.ON_DEMAND)
        t = state.tick
        zone = self._zone(state, market)
        series = coarsen(self._capacity(market)[-LOOKBACK_TICKS:], k)
        # The model is learned again only when the planner solves again.
        kept = self.planner.solution
        problem = PlanProblem(
            -(-setup.work // k),
            setup.deadline // k,
            -(-setup.changeover // k),
            float(market.price[zone, t]) * setup.tick_hours * k,
            setup.on_demand_price * setup.tick_hours * k,
            kept.problem.model if kept else CapacityModel.estimate(series, MODEL_EDGES),
        )
        step = min(t // k, problem.deadline - 1)
        if kept is not None and self.planner.due(problem, step):
            problem = replace(problem, model=CapacityModel.estimate(series, MODEL_EDGES))
        solution = self.planner.solution_for(problem, step)
        capacity = solution.problem.model.state_of(series)
        # Moving to another zone is a fresh start, not a kept instance.
        hold = HOLD_OF_MODE[state.mode]
        warming = -(-state.warming // k)
        if state.mode is Mode.SPOT and zone != state.zone:
            hold, warming = Hold.IDLE, 0
        choice = solution.choose(step, int(state.done) // k, hold, warming, capacity)
        if choice is Hold.SPOT:
            return Action(Mode.SPOT, zone)
        return Action(Mode.ON_DEMAND) if choice is Hold.ON_DEMAND else Action(Mode.IDLE)

    def _zone(self, state: SingleJobState, market: MarketWindow) -> int:
        """The zone a spot move would use: the one it is in while that lasts, else the
        cheapest with capacity (else the first). (Weighting zones by their learned
        interruption rates measured no better on the V100 traces.)"""
        t = state.tick
        if state.mode is Mode.SPOT and market.available[state.zone, t]:
            return state.zone
        open_zones = [z for z in self.zones if market.available[z, t]]
        if not open_zones:
            return self.zones[0]
        return min(open_zones, key=lambda z: (market.price[z, t], z))

    def _capacity(self, market: MarketWindow) -> np.ndarray:
        """Across zones: some zone had capacity (the model's "up")."""
        seen = np.stack([market.seen(z) for z in self.zones])
        return np.asarray(seen.max(axis=0), dtype=np.int8)


def _where(zones: list[int]) -> str:
    return "1 zone" if len(zones) == 1 else f"{len(zones)} zones"


@functools.cache  # the same job's grid on every tick: found once
def _grid(setup: Setup, budget_bytes: int) -> PlanGrid:
    tick = setup.tick_hours * 3600
    return PlanGrid.fitting(
        tick,
        setup.work * tick,
        setup.deadline * tick,
        setup.changeover * tick,
        2 * len(MODEL_EDGES),
        budget_bytes,
    )
