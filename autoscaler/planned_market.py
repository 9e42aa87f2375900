"""The spot planner (`autoscaler/spot_planner.py`) as the autoscaler's market rule for jobs with a
deadline; the simple rule (`deadline.choose_market`) stays for jobs without one, as the
fallback, and as the floor.

- `SpotHistory` is what the autoscaler has seen of spot capacity: per instance type, 1 where
  some zone's spot pool of that type was available in a round's market snapshot (capacity
  errors and interruptions held back, as `CapacityMemory.screen` marks them), one sample per
  `tick_seconds`, at most `keep` of them. It only records what a round saw: the planner never
  reads the future.
- `PlannedMarketRule` answers on-demand where the simple rule does (its safety net counts a
  notice at the worst moment and a replacement's start-up, which the planner's model does
  not), and also where the planner's expected cost says on-demand now beats waiting for spot.
  It never sends a job to spot that the simple rule would not.

Bounds, whatever the tick: each job's decisions fit `budget_bytes` (`PlanGrid` coarsens the
step), at most `max_jobs` solutions are kept (the least recently asked go first), and at most
`max_solves_per_round` are solved in one round (the others get the simple rule until their
turn). A job is solved again after `resolve_seconds`, when a price moves by more than a
quarter, or when it has more work left than its solution allowed for.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np
import numpy.typing as npt

from autoscaler.deadline import MarketChoice, MarketRule, choose_market, new_instance_startup
from autoscaler.market.quotes import MarketSnapshot
from autoscaler.pool_choice import fits, spot_zone_allowed
from autoscaler.snapshot import JobDemand, PurchaseSettings
from autoscaler.spot_planner import (
    CapacityModel,
    Hold,
    PlanGrid,
    PlanProblem,
    Solution,
    coarsen,
)
from kernel.instance_types import kind_of
from kernel.market import Market

# The memoryless two-state chain: the age-bucketed model planned no better on the V100 traces
# at 20 times the solving time (README, the simulator).
MODEL_EDGES: tuple[int, ...] = (0,)
PRICE_TOLERANCE = 0.25
MIN_SAVING = 0.10
# Decisions are made on steps of real time, not of whatever interval the market was probed
# at: one sample a minute at least (a round's), and the model's prior said in seconds (what
# 40 of the V100 traces' 195 s ticks were), so a market probed every 600 s, 195 s or 60 s
# that holds the same capacity is planned alike.
HISTORY_STEP_SECONDS = 60.0
PRIOR_SECONDS = 40 * 195.0
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass
class SpotHistory:
    tick_seconds: float
    keep: int = 3000  # 6.8 days of the traces' 195 s ticks
    series: dict[str, deque[int]] = field(default_factory=dict)
    last_slot: dict[str, int] = field(default_factory=dict)
    latest: MarketSnapshot | None = None  # the last round's prices
    origin: datetime = EPOCH  # steps are counted from here
    _seen: dict[tuple[str, ...], npt.NDArray[np.int8]] = field(default_factory=dict, repr=False)

    @classmethod
    def for_interval(
        cls, interval_seconds: float, lookback_days: float = 7.0, origin: datetime = EPOCH
    ) -> SpotHistory:
        """One sample per round (a minute at least), a week of them."""
        tick = max(HISTORY_STEP_SECONDS, interval_seconds)
        return cls(tick, keep=round(lookback_days * 86_400 / tick), origin=origin)

    def record(self, snapshot: MarketSnapshot) -> None:
        self.latest = snapshot
        up: dict[str, bool] = {}
        for quote in snapshot.quotes.values():
            if quote.pool.market is Market.SPOT:
                kind = quote.pool.instance_type
                up[kind] = up.get(kind, False) or quote.available
        slot = self._slot(snapshot.at)
        for kind, available in up.items():
            self._append(kind, slot, int(available))

    def preload(self, instance_type: str, values: Iterable[int], last_at: datetime) -> None:
        """A recorded past (the simulator's trace before its start), ending at `last_at`."""
        self._seen.clear()
        line = self.series.setdefault(instance_type, deque(maxlen=self.keep))
        line.extend(1 if v else 0 for v in values)
        self.last_slot[instance_type] = self._slot(last_at)

    def _slot(self, at: datetime) -> int:
        return int((at - self.origin).total_seconds() // self.tick_seconds)

    def _append(self, instance_type: str, slot: int, value: int) -> None:
        self._seen.clear()
        line = self.series.setdefault(instance_type, deque(maxlen=self.keep))
        last = self.last_slot.get(instance_type)
        if last is None or not line:
            line.append(value)
        elif slot == last:
            line[-1] = min(line[-1], value)  # down at any look within the step: down
        elif slot > last:
            # Steps no round looked at keep the last value seen.
            line.extend([line[-1]] * min(slot - last - 1, self.keep))
            line.append(value)
        else:
            return  # a snapshot older than one already recorded
        self.last_slot[instance_type] = slot

    def seen(self, instance_types: Iterable[str]) -> npt.NDArray[np.int8] | None:
        """1 where some type of `instance_types` had spot capacity, oldest first (aligned at
        each type's latest step). Kept until the next record: every job of a round that fits
        the same types reads one array."""
        key = tuple(sorted(set(instance_types)))
        if key not in self._seen:
            lines = [self.series[t] for t in key if self.series.get(t)]
            if not lines:
                return None
            length = min(len(line) for line in lines)
            stacked = np.array([list(line)[-length:] for line in lines], dtype=np.int8)
            self._seen[key] = np.asarray(stacked.max(axis=0), dtype=np.int8)
        return self._seen[key]


@dataclass
class _JobPlan:
    solution: Solution
    grid: PlanGrid
    solved_at: datetime
    # What the plan expects to save against the simple rule's moves, as a share of what
    # those cost (both in the planner's model, from the state the job was solved in).
    saving: float

    def prices(self) -> tuple[float, float]:
        """Spot and on-demand per GPU-hour, as solved."""
        problem, hours = self.solution.problem, self.grid.step_seconds / 3600
        return problem.spot_cost / hours, problem.on_demand_cost / hours


@dataclass
class PlannedMarketRule:
    history: SpotHistory
    budget_bytes: int = 8 * 2**20
    max_jobs: int = 64
    max_solves_per_round: int = 8
    min_history_seconds: float = 6 * 3600.0
    resolve_seconds: float = 6 * 3600.0
    # The guard: the planner overrules the simple rule only for a job where it expects to
    # save more than its own error (README, the simulator: measured on the shipped traces,
    # resampled and shifted).
    min_saving: float = MIN_SAVING
    fallback: MarketRule = choose_market
    plans: OrderedDict[str, _JobPlan] = field(default_factory=OrderedDict)
    round_at: datetime | None = None
    solved_this_round: int = 0

    def __call__(
        self,
        job: JobDemand,
        now: datetime,
        on_demand_seconds_left: float,
        settings: PurchaseSettings,
        startup_seconds: float | None = None,
    ) -> MarketChoice:
        simple = self.fallback(job, now, on_demand_seconds_left, settings, startup_seconds)
        if job.deadline is None or simple.market is Market.ON_DEMAND:
            return simple
        types = [t for t in settings.candidate_types if fits(job, kind_of(t))]
        series = self.history.seen(types)
        planned = self._plan(job, now, on_demand_seconds_left, settings, types, series)
        hours = simple.slack_seconds / 3600
        if job.running_on is Market.ON_DEMAND and planned not in (None, Hold.SPOT):
            why = f"planner: staying on on-demand costs less in expectation (slack {hours:.2f} h)"
            return MarketChoice(Market.ON_DEMAND, why, simple.slack_seconds)
        if planned is Hold.ON_DEMAND:
            why = f"planner: on-demand now costs less in expectation (slack {hours:.2f} h)"
            return MarketChoice(Market.ON_DEMAND, why, simple.slack_seconds)
        if planned is Hold.IDLE and series is not None and series[-1]:
            why = (
                f"planner: the spot there now is not expected to last its start-up's worth; "
                f"waits for better (slack {hours:.2f} h)"
            )
            return MarketChoice(Market.SPOT, why, simple.slack_seconds, wait=True)
        return simple

    def _plan(
        self,
        job: JobDemand,
        now: datetime,
        work_seconds: float,
        settings: PurchaseSettings,
        types: list[str],
        series: npt.NDArray[np.int8] | None,
    ) -> Hold | None:
        """The planner's move for the job (waiting, so holding nothing, or running on
        on-demand), or None where it has no plan: too little history, no prices, or no solving
        left this round."""
        assert job.deadline is not None
        prices = self._prices(job, types)
        if series is None or prices is None or not np.isfinite(work_seconds):
            return None
        if series.size * self.history.tick_seconds < self.min_history_seconds:
            return None
        plan = self.plans.get(job.job_id)
        if plan is None or self._stale(plan, now, work_seconds, prices):
            plan = self._solve(job, now, work_seconds, settings, series, prices)
            if plan is None:
                return None
        self.plans.move_to_end(job.job_id)
        if plan.saving <= self.min_saving:
            return None  # within the planner's own error: the simple rule decides
        grid, problem = plan.grid, plan.solution.problem
        tick = grid.steps_within((now - plan.solved_at).total_seconds())
        done = max(0, problem.work - grid.steps(work_seconds))
        if tick >= problem.deadline:
            return None
        capacity = problem.model.state_of(coarsen(series, grid.ticks_per_step))
        hold = Hold.ON_DEMAND if job.running_on is Market.ON_DEMAND else Hold.IDLE
        return plan.solution.choose(tick, done, hold, 0, capacity)

    def _solve(
        self,
        job: JobDemand,
        now: datetime,
        work_seconds: float,
        settings: PurchaseSettings,
        series: npt.NDArray[np.int8],
        prices: tuple[float, float],
    ) -> _JobPlan | None:
        if self.round_at != now:
            self.round_at, self.solved_this_round = now, 0
        if self.solved_this_round >= self.max_solves_per_round:
            return None
        self.solved_this_round += 1
        assert job.deadline is not None
        to_deadline = (job.deadline - now).total_seconds()
        startup = new_instance_startup(settings)
        model_states = 2 * len(MODEL_EDGES)
        grid = PlanGrid.fitting(
            self.history.tick_seconds,
            work_seconds,
            to_deadline,
            startup,
            model_states,
            self.budget_bytes,
        )
        steps = coarsen(series, grid.ticks_per_step)
        hours = grid.step_seconds / 3600
        problem = PlanProblem(
            grid.steps(work_seconds),
            grid.steps_within(to_deadline),
            grid.steps(startup),
            prices[0] * hours,
            prices[1] * hours,
            CapacityModel.estimate(steps, MODEL_EDGES, PRIOR_SECONDS / grid.step_seconds),
        )
        if problem.deadline <= problem.work:
            return None  # the planner's grid sees no slack: the simple rule decides
        solution = Solution(problem)
        hold = Hold.ON_DEMAND if job.running_on is Market.ON_DEMAND else Hold.IDLE
        capacity = problem.model.state_of(steps)
        ours = solution.expected(0, hold, capacity)
        simple = Solution(problem, simple=True).expected(0, hold, capacity)
        saving = (simple - ours) / simple if 0 < simple < float("inf") else 0.0
        plan = _JobPlan(solution, grid, now, saving)
        self.plans[job.job_id] = plan
        while len(self.plans) > self.max_jobs:
            self.plans.popitem(last=False)
        return plan

    def _stale(
        self, plan: _JobPlan, now: datetime, work_seconds: float, prices: tuple[float, float]
    ) -> bool:
        moved = any(
            abs(old - new) > PRICE_TOLERANCE * max(old, new)
            for old, new in zip(plan.prices(), prices, strict=True)
        )
        return (
            moved
            or (now - plan.solved_at).total_seconds() >= self.resolve_seconds
            or plan.grid.steps(work_seconds) > plan.solution.problem.work
        )

    def _prices(self, job: JobDemand, types: list[str]) -> tuple[float, float] | None:
        """The cheapest GPU-hour the job fits, on spot (where it may run) and on-demand."""
        snapshot = self.history.latest
        if snapshot is None:
            return None
        best: dict[Market, float] = {}
        for quote in snapshot.quotes.values():
            pool = quote.pool
            if pool.instance_type not in types or not spot_zone_allowed(job, pool):
                continue
            per_gpu = quote.price_per_hour / kind_of(pool.instance_type).gpus
            best[pool.market] = min(best.get(pool.market, per_gpu), per_gpu)
        if Market.SPOT not in best or Market.ON_DEMAND not in best:
            return None
        return best[Market.SPOT], best[Market.ON_DEMAND]
