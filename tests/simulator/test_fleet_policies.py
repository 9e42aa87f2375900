"""The baselines' market rules, as the fleet simulator plugs them into the product's policy."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from autoscaler.deadline import choose_market
from autoscaler.market.quotes import MarketSnapshot, PoolQuote
from autoscaler.market.trace import load_trace
from autoscaler.planned_market import SpotHistory
from autoscaler.pools import Pool
from autoscaler.snapshot import JobDemand, PurchaseSettings
from autoscaler.throughput import WorkShape
from kernel.market import Market
from simulator.fleet_policies import UniformProgressRule, greedy, on_demand_only, seen_before
from tests.support.paths import TEST_TRACES

NOW = datetime(2023, 2, 20, 12, 0, tzinfo=UTC)
SETTINGS = PurchaseSettings(
    candidate_types=("p3.2xlarge",),
    boot_seconds=600,
    model_load_seconds=120,
    checkpoint_interval_seconds=120,
)
SHAPE = WorkShape("simulated/video", 64, 64, 9)
TRACES = TEST_TRACES / "v100-slice"


def job(done: int, submitted_h_ago: float, deadline_in_h: float | None) -> JobDemand:
    deadline = None if deadline_in_h is None else NOW + timedelta(hours=deadline_in_h)
    return JobDemand("j", 5, NOW - timedelta(hours=submitted_h_ago), deadline, SHAPE, 100, done)


def uniform_progress(spot_now: bool) -> UniformProgressRule:
    history = SpotHistory(195.0)
    spot = PoolQuote(Pool("p3.2xlarge", "us-east-1a", Market.SPOT), 0.9, 0.0, spot_now)
    history.record(MarketSnapshot(NOW, {spot.pool: spot}))
    return UniformProgressRule(history)


def test_each_rule_decides_as_its_paper_says() -> None:
    # 40% done at half the window, 1.5 h of work left with 3 h to go: behind, with slack.
    lagging = job(done=40, submitted_h_ago=3, deadline_in_h=3)
    work_left = 1.5 * 3600
    no_spot, spot = uniform_progress(False), uniform_progress(True)
    # Uniform Progress: behind and no spot anywhere: on-demand; spot there: taking risks.
    assert no_spot(lagging, NOW, work_left, SETTINGS).market is Market.ON_DEMAND
    assert spot(lagging, NOW, work_left, SETTINGS).market is Market.SPOT
    # Hysteresis: on on-demand it stays until ahead of the pace two start-ups (24 min) later.
    running = replace(lagging, running_on=Market.ON_DEMAND)
    assert spot(running, NOW, work_left, SETTINGS).market is Market.ON_DEMAND
    just_ahead = replace(running, steps_done=51)  # ahead now, not 24 minutes from now
    assert spot(just_ahead, NOW, 0.8 * 3600, SETTINGS).market is Market.ON_DEMAND
    well_ahead = replace(running, steps_done=58)
    assert spot(well_ahead, NOW, 0.7 * 3600, SETTINGS).market is Market.SPOT
    assert greedy(lagging, NOW, work_left, SETTINGS).market is Market.SPOT
    assert on_demand_only(lagging, NOW, work_left, SETTINGS).market is Market.ON_DEMAND
    # FrameFleet keeps the safety net only, by default; with its pace rule turned up it moves
    # a lagging job once its slack would not absorb three interruptions.
    paced = replace(SETTINGS, behind_slack_factor=3.0)
    later = job(done=40, submitted_h_ago=3, deadline_in_h=2)
    assert choose_market(lagging, NOW, work_left, paced).market is Market.SPOT
    assert choose_market(later, NOW, work_left, paced).market is Market.ON_DEMAND
    assert choose_market(later, NOW, work_left, SETTINGS).market is Market.SPOT
    # Ahead of pace: Uniform Progress waits for spot too; without a deadline everyone but
    # on-demand only takes spot.
    ahead = job(done=70, submitted_h_ago=3, deadline_in_h=3)
    assert no_spot(ahead, NOW, 0.9 * 3600, SETTINGS).market is Market.SPOT
    free = job(done=0, submitted_h_ago=0, deadline_in_h=None)
    assert {
        no_spot(free, NOW, 3600, SETTINGS).market,
        greedy(free, NOW, 3600, SETTINGS).market,
    } == {Market.SPOT}


def test_every_rule_keeps_the_safety_net() -> None:
    # 10 minutes of slack cannot take a 14-minute interruption (start-up + notice).
    tight = job(done=0, submitted_h_ago=0, deadline_in_h=1.2 + 10 / 60 + 0.2)
    for rule in (greedy, uniform_progress(True), choose_market):
        assert rule(tight, NOW, 1.2 * 3600, SETTINGS).market is Market.ON_DEMAND


def test_the_planners_history_of_a_simulated_week_holds_only_its_past() -> None:
    """The fleet's planner starts with what a live autoscaler would have recorded before the
    week: rewriting the trace from the week's first tick on changes none of it."""
    trace = load_trace(TRACES)
    start = 400
    rewritten = replace(
        trace,
        zones={
            name: replace(zone, available=zone.available[:start] + (0, 1) * 2000)
            for name, zone in trace.zones.items()
        },
    )
    types = ("p3.2xlarge", "p3.8xlarge")
    before, after = seen_before(trace, start, types), seen_before(rewritten, start, types)
    assert before.series == after.series
    # In the autoscaler's own steps (a minute), each 195 s probe held: the past ends with the
    # last minute before the week.
    minutes = math.ceil(start * 195 / 60)
    assert before.last_slot == after.last_slot == dict.fromkeys(types, minutes - 1)
    union = before.seen(types)
    assert union is not None
    assert union.size == minutes
