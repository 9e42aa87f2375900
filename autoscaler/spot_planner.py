"""Which market a job with a deadline should use, as the expected-cost optimum under a model of
spot capacity learned from the past (pure).

The model: the capacity of the job's spot pool is a two-state Markov chain (up, down) per tick,
its two switching probabilities estimated from the pool's history; spot and on-demand cost
their current prices. Under that model the exact optimum is a dynamic program over (ticks
left, work left, the instance the job holds, its start-up ticks left, capacity now), the
stochastic twin of the omniscient optimum (simulator/omniscient.py): the same moves, with the
next tick's capacity an expectation instead of a known fact. Two properties follow:
- no lookahead: it reads only the history it is given;
- the deadline is kept: a move whose worst case (spot lost at the next tick) cannot finish on
  on-demand in time has an infinite expected cost, so the program never takes it.

One solution answers every (tick, work done, instance, capacity state) of a job: `SpotPlanner`
keeps it and solves again on a cadence, as the model learns, or when prices move.

The decisions take (ticks x work x start-up) bytes, cubic in the tick's fineness: a 48-hour job
on 34 s ticks would need 4 GiB. `PlanGrid` picks the finest decision step whose table fits a
byte budget, and `coarsen` turns a capacity series into that step (a step is "up" only if
capacity held through all of it), so memory and time stay bounded on any tick length.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import numpy.typing as npt

from kernel.errors import ConfigurationError

# Infeasible (the deadline missed) is a cost no finite plan reaches; finite, so that an
# expectation over states with probability 0 stays a number (inf * 0 is not).
INF = 1e18
MAX_CHOICE_BYTES = 2 * 2**30
# Pseudo-counts that keep a short or one-sided history from claiming certainty: as if each
# state had been seen to last `PRIOR_TICKS` ticks once (the single-job setting counts the
# V100 traces' 195 s ticks; the autoscaler says it in time, `planned_market.PRIOR_SECONDS`).
PRIOR_TICKS = 40.0


class Hold(IntEnum):
    """What the job holds (or takes) this tick."""

    IDLE = 0
    ON_DEMAND = 1
    SPOT = 2


# The ages (ticks since capacity last changed) that share a switching rate: capacity that has
# held for long tends to hold on (the traces' runs are heavy-tailed), which a memoryless
# chain cannot say. Powers of two up to about two days of 195 s ticks.
AGE_EDGES = (0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
# How many ticks of a bucket's own record outweigh the pool's overall rate in it.
BUCKET_PRIOR_TICKS = 10.0


@dataclass(frozen=True)
class CapacityModel:
    """A semi-Markov model of a pool's spot capacity: states (up or down, age bucket), each
    with its own chance of switching at the next tick."""

    transition: npt.NDArray[np.float64]  # [state now, state next]
    up: npt.NDArray[np.bool_]  # [state]
    edges: tuple[int, ...] = AGE_EDGES

    @classmethod
    def markov(cls, up_to_down: float, down_to_up: float) -> CapacityModel:
        """The memoryless two-state chain (one age bucket)."""
        transition = np.array([[1 - down_to_up, down_to_up], [up_to_down, 1 - up_to_down]])
        return cls(transition, np.array([False, True]), (0,))

    @classmethod
    def estimate(
        cls,
        history: Sequence[int] | npt.NDArray[np.int8],
        edges: tuple[int, ...] = AGE_EDGES,
        prior_ticks: float = PRIOR_TICKS,
    ) -> CapacityModel:
        """From a 0/1 series (the past only): each (state, age bucket)'s switching rate, drawn
        toward the state's overall rate where the record is thin. `prior_ticks`: how long, in
        the series' steps, the prior says each state lasts."""
        series = np.asarray(history, dtype=np.int8)
        buckets = len(edges)
        switches = np.zeros((2, buckets))
        exposure = np.zeros((2, buckets))
        if series.size >= 2:
            ages = run_ages(series)
            state, bucket = series[:-1], np.searchsorted(edges, ages[:-1], side="right") - 1
            np.add.at(exposure, (state, bucket), 1.0)
            np.add.at(switches, (state, bucket), (series[1:] != series[:-1]).astype(float))
        overall = (switches.sum(axis=1) + 1) / (exposure.sum(axis=1) + prior_ticks)
        rate = (switches + BUCKET_PRIOR_TICKS * overall[:, None]) / (exposure + BUCKET_PRIOR_TICKS)
        widths = np.diff(np.append(np.asarray(edges, dtype=float), np.inf))
        transition = np.zeros((2 * buckets, 2 * buckets))
        for s in (0, 1):
            for b in range(buckets):
                here = s * buckets + b
                older = 1.0 / widths[b]  # the chance a staying run moves to the next bucket
                transition[here, (1 - s) * buckets] += rate[s, b]
                if b + 1 < buckets:
                    transition[here, here + 1] += (1 - rate[s, b]) * older
                transition[here, here] += (1 - rate[s, b]) * (1 - older)
        up = np.repeat(np.array([False, True]), buckets)
        return cls(transition, up, edges)

    def state_of(self, history: Sequence[int] | npt.NDArray[np.int8]) -> int:
        """The model state the series ends in (up or down, and for how long)."""
        series = np.asarray(history, dtype=np.int8)
        age = int(run_ages(series)[-1])
        bucket = int(np.searchsorted(self.edges, age, side="right") - 1)
        return int(series[-1]) * len(self.edges) + bucket

    @property
    def states(self) -> int:
        return int(self.up.size)


def run_ages(series: npt.NDArray[np.int8]) -> npt.NDArray[np.int64]:
    """For each tick, how many ticks before it the series has held its value."""
    starts = np.flatnonzero(np.diff(series, prepend=np.int8(1 - series[0])) != 0)
    run_start = np.repeat(starts, np.diff(np.append(starts, series.size)))
    return np.arange(series.size) - run_start


def coarsen(series: Sequence[int] | npt.NDArray[np.int8], ticks: int) -> npt.NDArray[np.int8]:
    """A capacity series in steps of `ticks` ticks, the most recent step last: a step is up
    only if every tick of it was (an instance held through the step). A partial oldest step
    is dropped."""
    values = np.asarray(series, dtype=np.int8)
    if ticks <= 1:
        return values
    whole = values.size // ticks * ticks
    if whole == 0:
        return values[-1:].copy()
    return np.asarray(values[values.size - whole :].reshape(-1, ticks).min(axis=1), np.int8)


@dataclass(frozen=True)
class PlanGrid:
    """The decision step for one job: the finest multiple of the observed tick whose decision
    table (`cells`) fits `budget_bytes`."""

    tick_seconds: float  # what the capacity series was observed at
    ticks_per_step: int

    @property
    def step_seconds(self) -> float:
        return self.tick_seconds * self.ticks_per_step

    def steps(self, seconds: float) -> int:
        """Whole steps covering `seconds` (a start-up or work: rounded up)."""
        return max(0, math.ceil(seconds / self.step_seconds - 1e-9))

    def steps_within(self, seconds: float) -> int:
        """Whole steps that fit in `seconds` (time to a deadline: rounded down)."""
        return max(0, math.floor(seconds / self.step_seconds + 1e-9))

    @classmethod
    def fitting(
        cls,
        tick_seconds: float,
        work_seconds: float,
        deadline_seconds: float,
        changeover_seconds: float,
        states: int,
        budget_bytes: int,
    ) -> PlanGrid:
        ticks = 1
        while True:
            grid = cls(tick_seconds, ticks)
            needed = cells(
                grid.steps_within(deadline_seconds),
                grid.steps(work_seconds),
                grid.steps(changeover_seconds),
                states,
            )
            if needed <= budget_bytes:
                return grid
            ticks = max(ticks + 1, math.ceil(ticks * 1.2))


def cells(deadline: int, work: int, changeover: int, states: int) -> int:
    """Bytes of a solution's decision table (one per tick, hold, start-up left, work done,
    capacity state)."""
    return deadline * 3 * max(1, changeover) * (work + 1) * states


@dataclass(frozen=True)
class PlanProblem:
    work: int  # ticks of compute
    deadline: int  # ticks
    changeover: int  # start-up ticks without progress
    spot_cost: float  # USD per tick
    on_demand_cost: float  # USD per tick
    model: CapacityModel


class Solution:
    """choice[t][hold, startup_left, done, capacity]: 0 idle, 1 on-demand, 2 spot (a kept
    instance or a fresh one: the same hold as before means keep it)."""

    def __init__(self, problem: PlanProblem, first_tick: int = 0, simple: bool = False) -> None:
        """`simple`: instead of the cheapest moves, the simple rule's, in the same model: spot
        whenever there is capacity and the deadline allows it, waiting while it does not,
        on-demand only where nothing else keeps the deadline, and from on-demand back to spot
        where that costs less. What the cheapest saves against it is the planner's claim to
        act (`planned_market.PlannedMarketRule.min_saving`)."""
        self.problem, self.first_tick = problem, first_tick
        self.choices, self.start_values = _solve(problem, first_tick, simple)
        self.expected_cost = _finite(float(self.start_values[Hold.IDLE, 0, 0, -1]))

    def expected(self, done: int, hold: Hold, capacity: int) -> float:
        """The expected cost of the rest of the job from its first tick (with `done` work done
        and `hold` held, its start-up behind it), inf where the deadline cannot be kept."""
        return _finite(float(self.start_values[hold, 0, min(done, self.problem.work), capacity]))

    def choose(self, tick: int, done: int, hold: Hold, startup_left: int, capacity: int) -> Hold:
        """`capacity`: the model state now (`CapacityModel.state_of`)."""
        p = self.problem
        if done >= p.work or tick >= p.deadline:
            return Hold.IDLE
        if tick < self.first_tick:
            raise ValueError(f"solved from tick {self.first_tick}, asked for {tick}")
        if hold is Hold.SPOT and not p.model.up[capacity]:
            hold, startup_left = Hold.IDLE, 0  # its capacity went: the instance with it
        r = min(startup_left, max(0, p.changeover - 1))
        return Hold(int(self.choices[tick - self.first_tick, hold, r, done, capacity]))


def _finite(value: float) -> float:
    return value if value < FEASIBLE else float("inf")


# Below this an expected cost is a cost: the infeasible INF weighted by the chance of its
# worst case stays far above any real one.
FEASIBLE = 1e10


def _solve(
    problem: PlanProblem, first_tick: int, simple: bool = False
) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.float64]]:
    """The decisions of every tick from `first_tick` and the expected costs at `first_tick`."""
    p = problem
    warm = max(1, p.changeover)
    states, down = p.model.states, ~p.model.up
    needed = cells(p.deadline - first_tick, p.work, p.changeover, states)
    if needed > MAX_CHOICE_BYTES:
        raise ConfigurationError(
            f"planning this job needs {needed / 2**30:.1f} GiB of decisions (over "
            f"{MAX_CHOICE_BYTES / 2**30:.0f} GiB): plan on coarser ticks"
        )
    cost = {Hold.IDLE: 0.0, Hold.ON_DEMAND: p.on_demand_cost, Hold.SPOT: p.spot_cost}
    # value[hold, r, done, capacity] from the start of the next tick; done == work costs 0.
    value = np.full((3, warm, p.work + 1, states), INF)
    value[:, :, p.work, :] = 0.0
    choices = np.zeros((p.deadline - first_tick, 3, warm, p.work + 1, states), dtype=np.int8)
    for t in range(p.deadline - 1, first_tick - 1, -1):
        # expected[hold, r, done, capacity now]: E over the next tick's capacity; a spot
        # instance is lost with its capacity.
        spot_next = value[Hold.SPOT].copy()
        spot_next[:, :, down] = value[Hold.IDLE, 0][None, :, down]
        nexts = np.stack([value[Hold.IDLE], value[Hold.ON_DEMAND], spot_next])
        expected = (nexts.reshape(-1, states) @ p.model.transition.T).reshape(nexts.shape)
        new_value = np.empty_like(value)
        new_choice = np.empty((3, warm, p.work + 1, states), dtype=np.int8)
        # A fresh instance of each kind (its start-up first; spot only where there is
        # capacity), or none: [done, capacity now].
        fresh = {Hold.IDLE: expected[Hold.IDLE, 0]}
        for hold in (Hold.ON_DEMAND, Hold.SPOT):
            fresh[hold] = cost[hold] + _advance(expected[hold], p.changeover, warm)
        fresh[Hold.SPOT][:, down] = INF
        fresh_best, fresh_choice = (_simple_fresh if simple else _cheapest)(fresh)
        new_value[Hold.IDLE] = fresh_best
        new_choice[Hold.IDLE] = fresh_choice
        for hold in (Hold.ON_DEMAND, Hold.SPOT):
            for r in range(warm):
                keep = cost[hold] + _advance(expected[hold], r, warm)
                if hold is Hold.SPOT:
                    keep[:, down] = INF
                # The simple rule keeps a spot instance while it lasts and the deadline
                # allows; it leaves on-demand only for spot where that costs less.
                better = (keep < FEASIBLE) if simple and hold is Hold.SPOT else keep < fresh_best
                if simple and hold is Hold.ON_DEMAND:
                    better = keep <= fresh[Hold.SPOT]
                new_value[hold, r] = np.where(better, keep, fresh_best)
                new_choice[hold, r] = np.where(better, np.int8(hold), fresh_choice)
        new_value[:, :, p.work, :] = 0.0
        value = new_value
        choices[t - first_tick] = new_choice
    return choices, value


Options = dict[Hold, npt.NDArray[np.float64]]


def _cheapest(fresh: Options) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int8]]:
    best, choice = fresh[Hold.IDLE].copy(), np.zeros(fresh[Hold.IDLE].shape, dtype=np.int8)
    for hold in (Hold.ON_DEMAND, Hold.SPOT):
        better = fresh[hold] < best
        best = np.where(better, fresh[hold], best)
        choice = np.where(better, np.int8(hold), choice)
    return best, choice


def _simple_fresh(fresh: Options) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int8]]:
    """Spot where the deadline allows it, else waiting where it allows that, else on-demand."""
    spot, idle = fresh[Hold.SPOT] < FEASIBLE, fresh[Hold.IDLE] < FEASIBLE
    choice = np.where(spot, np.int8(Hold.SPOT), np.where(idle, np.int8(0), np.int8(1)))
    best = np.where(spot, fresh[Hold.SPOT], np.where(idle, fresh[Hold.IDLE], fresh[Hold.ON_DEMAND]))
    return best, choice.astype(np.int8)


def _advance(
    expected: npt.NDArray[np.float64], startup_left: int, warm: int
) -> npt.NDArray[np.float64]:
    """expected[r, done, capacity] -> the expected value after a tick on an instance with
    `startup_left` start-up ticks to go before this one (0: this tick makes progress)."""
    if startup_left > 0:
        kept: npt.NDArray[np.float64] = expected[min(startup_left, warm) - 1]
        return kept
    shifted = np.empty(expected.shape[1:])
    shifted[:-1] = expected[0, 1:]
    shifted[-1] = 0.0
    return shifted


@dataclass
class SpotPlanner:
    """Keeps one solution per job: solves again when `resolve_ticks` have passed since the
    last solution (the model has had time to learn), or at once when a price has moved by
    more than `price_tolerance` (relative) or the job itself changed."""

    resolve_ticks: int = 110  # about six hours of 195 s ticks
    price_tolerance: float = 0.25
    solution: Solution | None = None

    def solution_for(self, problem: PlanProblem, tick: int) -> Solution:
        current = self.solution
        if current is None or self.due(problem, tick):
            current = self.solution = Solution(problem, tick)
        return current

    def due(self, problem: PlanProblem, tick: int) -> bool:
        """Whether `problem` at `tick` needs a new solution (its model aside: a caller may
        learn a fresh one only when it does)."""
        current = self.solution
        return (
            current is None
            or tick - current.first_tick >= self.resolve_ticks
            or _moved(current.problem, problem, self.price_tolerance)
        )


def _moved(old: PlanProblem, new: PlanProblem, tolerance: float) -> bool:
    if (old.work, old.deadline, old.changeover) != (new.work, new.deadline, new.changeover):
        return True
    pairs = [(old.spot_cost, new.spot_cost), (old.on_demand_cost, new.on_demand_cost)]
    return any(abs(a - b) > tolerance * max(a, b) for a, b in pairs)
