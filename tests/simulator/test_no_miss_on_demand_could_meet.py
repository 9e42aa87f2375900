"""No miss the market allowed: over random traces, every policy finishes every job whose
deadline on-demand alone could meet (its start-up and all its work before the deadline),
whatever the trace does, including taking spot away at the worst moment (the tick a start-up
ends, or every other tick)."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator.framefleet_policy import FrameFleetPolicy
from simulator.model_policy import ModelPolicy
from simulator.single_job import (
    Greedy,
    GreedyAnyZone,
    MarketWindow,
    OnDemandOnly,
    Policy,
    Setup,
    UniformProgress,
    simulate,
)


def policies(zones: int) -> list[Policy]:
    everywhere = list(range(zones))
    return [
        OnDemandOnly(),
        Greedy(0),
        UniformProgress(0),
        FrameFleetPolicy([0]),
        ModelPolicy([0]),
        GreedyAnyZone(everywhere),
        UniformProgress(everywhere),
        FrameFleetPolicy(everywhere),
        ModelPolicy(everywhere),
        # A decision table of 4 KB: the planner on a grid of several ticks per step.
        ModelPolicy([0], "planner on a coarse grid", budget_bytes=4_000),
    ]


@st.composite
def feasible_jobs(draw: st.DrawFn) -> tuple[Setup, MarketWindow]:
    changeover = draw(st.integers(0, 4))
    work = draw(st.integers(1, 30))
    # On-demand alone meets it: its start-up and all the work fit, with 0 to 12 ticks to spare.
    deadline = work + changeover + draw(st.integers(0, 12))
    zones = draw(st.integers(1, 3))
    shape = st.sampled_from(["random", "flapping", "lost after start-up", "runs"])
    kind = draw(shape)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if kind == "random":
        available = rng.random((zones, deadline)) < 0.5
    elif kind == "flapping":  # up every other tick: every spot start is lost
        available = np.tile(np.arange(deadline) % 2 == 0, (zones, 1))
    elif kind == "lost after start-up":  # up just long enough to start, then gone
        period = changeover + 1
        available = np.tile(np.arange(deadline) % (2 * period) < period, (zones, 1))
    else:
        available = np.repeat(rng.random((zones, deadline // 4 + 1)) < 0.6, 4, axis=1)
        available = available[:, :deadline]
    prices = rng.uniform(0.3, 1.5, (zones, deadline))
    market = MarketWindow(tuple(f"z{i}" for i in range(zones)), available.astype(np.int8), prices)
    return Setup(work, deadline, changeover, 0.5, 3.0), market


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(feasible_jobs())
def test_every_policy_meets_every_deadline_on_demand_could_meet(
    job: tuple[Setup, MarketWindow],
) -> None:
    setup, market = job
    for policy in policies(len(market.zones)):
        outcome = simulate(policy, setup, market)
        assert outcome.met_deadline, (policy.name, setup)
