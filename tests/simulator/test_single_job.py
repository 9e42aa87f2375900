"""The single-job simulator and its omniscient optimum: no policy that finishes in time ever
pays less than the optimum; the simulator's rules (changeover, preemption, safety net) hold."""

from __future__ import annotations

import numpy as np
import pytest

from autoscaler.market.trace import load_trace
from kernel.errors import ConfigurationError
from simulator.framefleet_policy import FrameFleetPolicy
from simulator.model_policy import ModelPolicy
from simulator.omniscient import omniscient
from simulator.single_job import (
    Action,
    Greedy,
    GreedyAnyZone,
    MarketWindow,
    OnDemandOnly,
    Policy,
    Setup,
    SingleJobState,
    UniformProgress,
    simulate,
)
from simulator.study import StudyConfig, market_from, run_study, setup_for
from tests.support.paths import TEST_TRACES

TRACES = TEST_TRACES / "v100-slice"


def random_case(rng: np.random.Generator) -> tuple[Setup, MarketWindow]:
    ticks = int(rng.integers(12, 40))
    work = int(rng.integers(3, ticks - 6))
    setup = Setup(work, ticks, int(rng.integers(0, 3)), 0.5, 3.0)
    # Bursty availability, like the traces: runs of 1s and 0s.
    available = np.repeat(rng.random((3, ticks // 3 + 1)) < 0.6, 3, axis=1)[:, :ticks]
    market = MarketWindow(
        ("a", "b", "c"), available.astype(np.int8), rng.uniform(0.5, 1.5, (3, ticks))
    )
    return setup, market


def test_no_policy_beats_the_omniscient_optimum() -> None:
    rng = np.random.default_rng(11)
    for _ in range(150):
        setup, market = random_case(rng)
        one_zone = omniscient(setup, market, [0])
        every_zone = omniscient(setup, market)
        assert every_zone.cost <= one_zone.cost + 1e-9
        assert one_zone.met_deadline
        for policy in (
            OnDemandOnly(),
            Greedy(0),
            UniformProgress(0),
            FrameFleetPolicy([0]),
            ModelPolicy([0]),
        ):
            outcome = simulate(policy, setup, market)
            assert outcome.met_deadline, policy.name  # the safety net holds
            assert one_zone.cost <= outcome.cost + 1e-9, policy.name
        for mover in (
            FrameFleetPolicy([0, 1, 2]),
            GreedyAnyZone([0, 1, 2]),
            UniformProgress([0, 1, 2]),
            ModelPolicy([0, 1, 2]),
        ):
            moving = simulate(mover, setup, market)
            assert moving.met_deadline, mover.name
            assert every_zone.cost <= moving.cost + 1e-9, mover.name


class Recorder:
    """Wraps a policy and writes down what it decided at each tick."""

    def __init__(self, policy: Policy) -> None:
        self.policy, self.name = policy, policy.name
        self.decisions: list[tuple[int, Action]] = []

    def act(self, state: SingleJobState, setup: Setup, market: MarketWindow) -> Action:
        action = self.policy.act(state, setup, market)
        self.decisions.append((state.tick, action))
        return action


def every_policy() -> list[Policy]:
    zones = [0, 1, 2]
    return [
        OnDemandOnly(),
        Greedy(0),
        UniformProgress(0),
        FrameFleetPolicy([0]),
        GreedyAnyZone(zones),
        UniformProgress(zones),
        FrameFleetPolicy(zones),
        ModelPolicy([0]),
        ModelPolicy(zones),
    ]


def test_no_policy_reads_the_future() -> None:
    """Rewriting the trace after a tick changes no decision up to that tick; and a policy is
    handed nothing past the present tick to read."""
    rng = np.random.default_rng(5)
    for _ in range(40):
        setup, market = random_case(rng)
        cut = int(rng.integers(1, setup.deadline - 1))
        future = market.available.copy()
        future[:, cut + 1 :] = rng.random(future[:, cut + 1 :].shape) < 0.5
        prices = market.price.copy()
        prices[:, cut + 1 :] = rng.uniform(0.1, 3.0, prices[:, cut + 1 :].shape)
        rewritten = MarketWindow(market.zones, future.astype(np.int8), prices)
        # Fresh policies for each run: one that learns must not carry the first run over.
        for policy, twin in zip(every_policy(), every_policy(), strict=True):
            first, second = Recorder(policy), Recorder(twin)
            simulate(first, setup, market)
            simulate(second, setup, rewritten)
            assert [d for d in first.decisions if d[0] <= cut] == [
                d for d in second.decisions if d[0] <= cut
            ], policy.name
    seen = market.until(3)
    assert seen.available.shape[1] == 4
    with pytest.raises(IndexError):
        _ = seen.available[0, 4]


def test_the_optimum_replays_into_hours_that_match_its_cost() -> None:
    setup = Setup(work=4, deadline=10, changeover=1, tick_hours=1.0, on_demand_price=3.0)
    available = np.array([[1, 1, 1, 1, 1, 0, 0, 0, 0, 0]], dtype=np.int8)
    market = MarketWindow(("a",), available, np.full((1, 10), 1.0))
    best = omniscient(setup, market)
    assert best.cost == pytest.approx(5.0)  # five spot hours: one start-up, four of work
    assert (best.spot_hours, best.on_demand_hours, best.finished_tick) == (5.0, 0.0, 5)


def test_on_demand_only_pays_work_plus_one_changeover() -> None:
    setup = Setup(work=5, deadline=8, changeover=2, tick_hours=1.0, on_demand_price=3.0)
    market = MarketWindow(("a",), np.ones((1, 8), dtype=np.int8), np.ones((1, 8)))
    outcome = simulate(OnDemandOnly(), setup, market)
    assert outcome.cost == pytest.approx(21.0)
    assert outcome.finished_tick == 7


def test_a_preempted_spot_instance_stops_costing_and_the_safety_net_takes_over() -> None:
    setup = Setup(work=6, deadline=10, changeover=1, tick_hours=1.0, on_demand_price=3.0)
    available = np.array([[1, 1, 1, 0, 0, 0, 0, 0, 0, 0]], dtype=np.int8)
    market = MarketWindow(("a",), available, np.ones((1, 10)))
    outcome = simulate(Greedy(0), setup, market)
    assert outcome.met_deadline
    assert outcome.spot_hours == 3.0  # lost at tick 3
    assert outcome.on_demand_hours == 5.0  # one start-up + the four ticks of work left


def test_the_study_runs_every_policy_on_the_same_trace_slices() -> None:
    trace = load_trace(TRACES)
    config = StudyConfig(compute_hours=8, job_fraction=0.8, starts_per_zone=2)
    setup = setup_for(trace, config)
    assert setup.changeover == 4  # 0.2 h in 195-second ticks
    assert market_from(trace, 0, setup.deadline).available.shape == (3, setup.deadline)
    summaries, outcomes = run_study(trace, config)
    by_name = {s.policy: s for s in summaries}
    assert by_name["omniscient (1 zone)"].gap_to_optimum == 0
    assert all(s.misses == 0 for s in summaries)
    assert all(len(runs) == 6 for runs in outcomes.values())
    assert all(s.mean_cost >= by_name["omniscient (1 zone)"].mean_cost - 1e-9 for s in summaries)
    assert by_name["on-demand only"].cost_vs_on_demand == 1.0


def test_an_optimum_too_big_for_the_machine_says_so_before_trying() -> None:
    """A 48 h job on 32 s ticks across nine zones would need 18 GB of decisions."""
    ticks = 6750
    setup = Setup(
        work=5400, deadline=ticks, changeover=23, tick_hours=32 / 3600, on_demand_price=3.06
    )
    market = MarketWindow(
        tuple(f"z{i}" for i in range(9)), np.ones((9, ticks), dtype=np.int8), np.ones((9, ticks))
    )
    with pytest.raises(ConfigurationError, match="GiB"):
        omniscient(setup, market)
