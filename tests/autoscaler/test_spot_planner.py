"""The model-based spot rule: its capacity model learns what a series shows, its program is
the omniscient optimum's when the model is certain, and it never takes a move whose worst case
misses the deadline."""

from __future__ import annotations

import numpy as np
import pytest

from autoscaler.spot_planner import (
    AGE_EDGES,
    CapacityModel,
    Hold,
    PlanProblem,
    Solution,
    SpotPlanner,
    run_ages,
)
from simulator.omniscient import omniscient
from simulator.single_job import MarketWindow, Setup


def test_run_ages_count_the_ticks_a_value_has_held() -> None:
    series = np.array([1, 1, 1, 0, 0, 1], dtype=np.int8)
    assert run_ages(series).tolist() == [0, 1, 2, 0, 1, 0]


def test_the_model_learns_the_switching_rates_of_a_series() -> None:
    rng = np.random.default_rng(3)
    # A chain that leaves "up" with 2% and "down" with 10% per tick.
    state, series = 1, []
    for _ in range(60_000):
        series.append(state)
        state = 1 - state if rng.random() < (0.02 if state else 0.10) else state
    model = CapacityModel.estimate(series, edges=(0,))
    assert model.transition[1, 0] == pytest.approx(0.02, rel=0.1)
    assert model.transition[0, 1] == pytest.approx(0.10, rel=0.1)
    aged = CapacityModel.estimate(series)
    assert np.allclose(aged.transition.sum(axis=1), 1.0)
    assert aged.states == 2 * len(AGE_EDGES)
    # Where it ends: up (the last value), in the bucket of its run's age.
    assert aged.up[aged.state_of(series)] == bool(series[-1])


def test_a_certain_model_plans_what_the_omniscient_optimum_pays() -> None:
    """Spot that never fails: the program pays exactly the optimum of an always-up trace (and,
    with no time to wait, starts spot at once)."""
    setup = Setup(work=6, deadline=8, changeover=2, tick_hours=1.0, on_demand_price=3.0)
    market = MarketWindow(("a",), np.ones((1, 8), dtype=np.int8), np.full((1, 8), 1.0))
    best = omniscient(setup, market)
    never_fails = CapacityModel.markov(up_to_down=0.0, down_to_up=1.0)
    solution = Solution(PlanProblem(6, 8, 2, 1.0, 3.0, never_fails))
    assert solution.expected_cost == pytest.approx(best.cost)
    assert solution.choose(0, 0, Hold.IDLE, 0, capacity=1) is Hold.SPOT
    assert solution.choose(3, 1, Hold.SPOT, 0, capacity=1) is Hold.SPOT  # kept


def test_no_move_is_taken_whose_worst_case_misses_the_deadline() -> None:
    """With no slack for one lost spot tick, on-demand, however cheap and reliable spot looks;
    with slack, spot."""
    reliable = CapacityModel.markov(up_to_down=0.001, down_to_up=0.5)
    tight = Solution(
        PlanProblem(
            work=8, deadline=10, changeover=2, spot_cost=0.1, on_demand_cost=3.0, model=reliable
        )
    )
    assert tight.choose(0, 0, Hold.IDLE, 0, capacity=1) is Hold.ON_DEMAND
    loose = Solution(
        PlanProblem(
            work=8, deadline=30, changeover=2, spot_cost=0.1, on_demand_cost=3.0, model=reliable
        )
    )
    assert loose.choose(0, 0, Hold.IDLE, 0, capacity=1) is Hold.SPOT
    # Down now: wait for spot while the slack allows.
    assert loose.choose(0, 0, Hold.IDLE, 0, capacity=0) is Hold.IDLE


def test_the_planner_solves_again_on_its_cadence_or_when_prices_move() -> None:
    model = CapacityModel.markov(0.01, 0.1)
    planner = SpotPlanner(resolve_ticks=5)
    problem = PlanProblem(4, 12, 1, 1.0, 3.0, model)
    first = planner.solution_for(problem, 0)
    assert planner.solution_for(problem, 4) is first
    assert planner.solution_for(problem, 5) is not first
    again = planner.solution_for(problem, 6)
    assert planner.solution_for(PlanProblem(4, 12, 1, 2.0, 3.0, model), 6) is not again
