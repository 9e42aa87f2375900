"""The purchase policy as tables: each case a state and the decision it must lead to."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta

import pytest

from autoscaler.market.quotes import MarketSnapshot, PoolQuote
from autoscaler.policy import plan
from autoscaler.pool_choice import cost_per_video, pick_pool
from autoscaler.pools import Pool
from autoscaler.snapshot import InstanceView, JobDemand, Plan, PlanInput, PurchaseSettings
from autoscaler.throughput import ThroughputModel, WorkShape
from kernel.market import Market
from tests.support.market_snapshots import (
    MARKET,
    NOW,
    ON_DEMAND,
    SETTINGS,
    SPOT_A,
    SPOT_B,
    SPOT_C,
    TYPE,
    job,
    market,
    pool,
)
from tests.support.paces import linear_pace


def decide(
    *jobs: JobDemand, quotes: MarketSnapshot = MARKET, instances: Sequence[InstanceView] = ()
) -> Plan:
    return plan(PlanInput(NOW, jobs, tuple(instances), quotes), SETTINGS, linear_pace())


CASES = [
    # (case, job, expected market, words in the reason)
    ("slack -> spot", job(deadline_in=timedelta(hours=8)), Market.SPOT, "slack"),
    ("no deadline -> spot", job(), Market.SPOT, "no deadline"),
    (
        "behind uniform progress -> on-demand",
        job(deadline_in=timedelta(hours=1.4), submitted_ago=timedelta(hours=6), done=150),
        Market.ON_DEMAND,
        "behind uniform progress",
    ),
    (
        "deadline unreachable on spot -> on-demand at once",
        job(deadline_in=timedelta(hours=1.0)),
        Market.ON_DEMAND,
        "one interruption from unreachable",
    ),
    (
        "already too late -> on-demand at once (best effort)",
        job(deadline_in=timedelta(minutes=20)),
        Market.ON_DEMAND,
        "unreachable on spot",
    ),
    (
        "behind but with plenty of slack -> still spot",
        job(deadline_in=timedelta(hours=10), submitted_ago=timedelta(hours=10), done=100),
        Market.SPOT,
        "behind pace",
    ),
]


@pytest.mark.parametrize(("case", "demand", "expected", "words"), CASES, ids=[c[0] for c in CASES])
def test_market_per_job(case: str, demand: JobDemand, expected: Market, words: str) -> None:
    decided = decide(demand)
    assert len(decided.launches) == 1, case
    launch = decided.launches[0]
    assert launch.pool.market is expected
    assert words in launch.reason
    assert launch.job_ids == (demand.job_id,)


def test_the_cheapest_pool_per_step_wins_and_spot_is_spread() -> None:
    decided = decide(*(job(f"j{i}") for i in range(6)))
    pools = [launch.pool for launch in decided.launches]
    assert pools[0] == SPOT_A.pool
    assert {p.availability_zone for p in pools} == {"us-east-1a", "us-east-1b", "us-east-1c"}
    assert max(pools.count(p) for p in set(pools)) == 2  # 34% of six


def test_spot_is_not_spread_to_a_pool_that_costs_much_more() -> None:
    dear = PoolQuote(pool("d"), 0.90, 0.002)  # 29% above the cheapest
    quotes = market(SPOT_A, PoolQuote(pool("b"), 0.72, 0.002), dear, ON_DEMAND)
    decided = decide(*(job(f"j{i}") for i in range(6)), quotes=quotes)
    pools = [launch.pool for launch in decided.launches]
    assert dear.pool not in pools
    assert sorted(pools.count(p) for p in set(pools)) == [3, 3]


def test_a_recently_interrupted_pool_is_avoided() -> None:
    interrupted = replace(SPOT_A, available=False, why_unavailable="spot interruption")
    decided = decide(job(), quotes=market(interrupted, SPOT_B, ON_DEMAND))
    (launch,) = decided.launches
    assert launch.pool == SPOT_B.pool


def test_a_risky_pool_costs_more_than_its_price_says() -> None:
    risky = replace(SPOT_A, interruptions_per_hour=2.0)  # two per hour: rework dominates
    decided = decide(job(), quotes=market(risky, SPOT_B))
    (launch,) = decided.launches
    assert launch.pool == SPOT_B.pool


def test_no_spot_anywhere_jobs_with_slack_wait_and_tight_ones_go_on_demand() -> None:
    down = [replace(q, available=False) for q in (SPOT_A, SPOT_B, SPOT_C)]
    decided = decide(
        job("tight", deadline_in=timedelta(hours=1)),
        job("slack", deadline_in=timedelta(hours=8)),
        job("whenever"),
        quotes=market(*down, ON_DEMAND),
    )
    (launch,) = decided.launches
    assert launch.job_ids == ("tight",)
    assert launch.pool.market is Market.ON_DEMAND
    waits = {w.job_id: w.reason for w in decided.waits}
    assert set(waits) == {"slack", "whenever"}
    assert "h slack; on-demand once it runs short" in waits["slack"]
    assert "no deadline" in waits["whenever"]


@pytest.mark.parametrize(
    ("limit", "spent"), [("budget_per_hour", 0.0), ("budget_per_day", 99.0)], ids=["hour", "day"]
)
def test_budget_reached_means_no_launch_and_a_reason(limit: str, spent: float) -> None:
    running = InstanceView("i-1", SPOT_A.pool, 0.70, NOW, 1, busy_gpus=1, unsaved_work=True)
    if limit == "budget_per_hour":
        settings = replace(SETTINGS, budget_per_hour=1.0)
    else:
        settings = replace(SETTINGS, budget_per_day=100.0)
    state = PlanInput(
        NOW,
        (job("high", priority=9), job("low", priority=1)),
        (running,),
        MARKET,
        spent_today=spent,
    )
    decided = plan(state, settings, linear_pace())
    assert decided.launches == ()
    assert [w.job_id for w in decided.waits] == ["high", "low"]  # the less urgent wait too
    assert all("budget" in w.reason for w in decided.waits)


def test_budget_lets_the_urgent_job_in_and_holds_the_rest() -> None:
    settings = replace(SETTINGS, budget_per_hour=1.0)
    state = PlanInput(NOW, (job("low", priority=1), job("high", priority=9)), (), MARKET)
    decided = plan(state, settings, linear_pace())
    assert [launch.job_ids for launch in decided.launches] == [("high",)]
    assert [w.job_id for w in decided.waits] == ["low"]


def test_a_dear_job_over_budget_does_not_stop_the_cheap_ones_after_it() -> None:
    # The urgent job needs on-demand ($1.86/h), more than the budget; the spot job behind it
    # ($0.70/h) fits, and is bought.
    settings = replace(SETTINGS, budget_per_hour=1.0)
    dear = job("dear", priority=9, deadline_in=timedelta(hours=1))
    state = PlanInput(NOW, (dear, job("cheap", priority=1)), (), MARKET)
    decided = plan(state, settings, linear_pace())
    assert [launch.job_ids for launch in decided.launches] == [("cheap",)]
    assert [(w.job_id, "budget" in w.reason) for w in decided.waits] == [("dear", True)]


def test_free_gpus_are_used_before_buying() -> None:
    idle = InstanceView("i-idle", SPOT_B.pool, 0.75, NOW, 1, idle_since=NOW)
    decided = decide(job("a"), job("b"), instances=[idle])
    assert decided.placed == (("a", "i-idle"),)
    assert [launch.job_ids for launch in decided.launches] == [("b",)]


def test_a_spot_gpu_is_not_used_for_a_job_that_needs_on_demand() -> None:
    idle_spot = InstanceView("i-spot", SPOT_B.pool, 0.75, NOW, 1, idle_since=NOW)
    decided = decide(job("tight", deadline_in=timedelta(hours=1)), instances=[idle_spot])
    assert decided.placed == ()
    assert decided.launches[0].pool.market is Market.ON_DEMAND


def test_scale_in_terminates_idle_instances_but_keeps_warm_minimum_and_unsaved_work() -> None:
    long_ago = NOW - timedelta(hours=1)
    instances = [
        InstanceView("i-idle-dear", ON_DEMAND.pool, 1.861, long_ago, 1, idle_since=long_ago),
        InstanceView("i-idle-cheap", SPOT_A.pool, 0.70, long_ago, 1, idle_since=long_ago),
        InstanceView("i-just-idle", SPOT_B.pool, 0.75, long_ago, 1, idle_since=NOW),
        InstanceView("i-busy", SPOT_C.pool, 0.80, long_ago, 1, busy_gpus=1, unsaved_work=True),
    ]
    settings = replace(SETTINGS, warm_minimum=3)
    decided = plan(PlanInput(NOW, (), tuple(instances), MARKET), settings, linear_pace())
    (termination,) = decided.terminations
    assert termination.instance_id == "i-idle-dear"  # the dearest idle one, down to three
    assert "idle 60 min" in termination.reason
    everything = plan(PlanInput(NOW, (), tuple(instances), MARKET), SETTINGS, linear_pace())
    assert {t.instance_id for t in everything.terminations} == {"i-idle-dear", "i-idle-cheap"}


def test_a_job_keeps_the_instance_bought_for_it() -> None:
    booting = InstanceView("i-for-b", SPOT_B.pool, 0.75, NOW - timedelta(minutes=1), 1)
    state = PlanInput(
        NOW,
        (job("a", priority=9), job("b", priority=1)),
        (booting,),
        MARKET,
        reservations={"b": "i-for-b"},
    )
    decided = plan(state, SETTINGS, linear_pace())
    assert decided.placed == (("b", "i-for-b"),)
    assert [launch.job_ids for launch in decided.launches] == [("a",)]


def test_a_spot_instance_almost_booted_still_counts_for_a_tight_job() -> None:
    # Slack for a start-up from scratch is too short for spot, but the instance bought for
    # the job has nearly finished its start-up: waiting for it beats buying on-demand.
    tight = job("tight", deadline_in=timedelta(minutes=65))
    assert decide(tight).launches[0].pool.market is Market.ON_DEMAND
    nearly = InstanceView("i-nearly", SPOT_B.pool, 0.75, NOW - timedelta(seconds=140), 1)
    state = PlanInput(NOW, (tight,), (nearly,), MARKET, reservations={"tight": "i-nearly"})
    decided = plan(state, SETTINGS, linear_pace())
    assert decided.placed == (("tight", "i-nearly"),)
    assert decided.launches == ()


def test_a_spot_launch_offers_ec2_the_pools_as_good_as_its_own() -> None:
    """CreateFleet's price-capacity-optimized gets something to choose from: the pools within
    the spread premium (not one that costs much more), the chosen pool first; on-demand gets
    its one pool."""
    dear = PoolQuote(pool("d"), 0.90, 0.002)  # 29% above the cheapest
    quotes = market(SPOT_A, SPOT_B, SPOT_C, dear, ON_DEMAND)
    (spot,) = decide(job(), quotes=quotes).launches
    assert spot.pool == SPOT_A.pool
    assert spot.alternatives == (SPOT_B.pool, SPOT_C.pool)
    (on_demand,) = decide(job(deadline_in=timedelta(hours=1.0)), quotes=quotes).launches
    assert on_demand.pool.market is Market.ON_DEMAND
    assert on_demand.alternatives == ()


# Packing: g6e.12xlarge has four L40S GPUs; these prices make it cheaper per GPU than four
# g6e.xlarge (spot $0.70 each) only when all four GPUs are used.
QUAD = "g6e.12xlarge"
QUAD_SETTINGS = replace(SETTINGS, candidate_types=(TYPE, QUAD))


def quad(zone: str, price: float, market: Market = Market.SPOT) -> PoolQuote:
    return PoolQuote(Pool(QUAD, f"us-east-1{zone}", market), price, 0.002)


def decide_packed(*jobs: JobDemand, quotes: MarketSnapshot) -> Plan:
    return plan(PlanInput(NOW, jobs, (), quotes), QUAD_SETTINGS, linear_pace())


def test_four_queued_jobs_buy_one_four_gpu_instance_when_cheaper_per_job() -> None:
    quotes = market(SPOT_A, quad("a", 2.40), quad("b", 2.50), ON_DEMAND)
    (launch,) = decide_packed(*(job(f"j{n}") for n in range(4)), quotes=quotes).launches
    assert launch.pool.instance_type == QUAD
    assert launch.job_ids == ("j0", "j1", "j2", "j3")  # in urgency order, one GPU each
    assert "its other GPUs for j1, j2, j3" in launch.reason
    # EC2 may take the other 4-GPU pool, never a 1-GPU one that would carry one job.
    assert launch.alternatives == (quad("b", 2.50).pool,)


def test_one_job_alone_does_not_pay_for_gpus_nobody_uses() -> None:
    quotes = market(SPOT_A, quad("a", 2.40), ON_DEMAND)
    (launch,) = decide_packed(job("alone"), quotes=quotes).launches
    assert launch.pool == SPOT_A.pool
    # Two jobs fill half of it ($1.20 a job): two 1-GPU instances are cheaper.
    two = decide_packed(job("a"), job("b"), quotes=quotes).launches
    assert [launch.pool.instance_type for launch in two] == [TYPE, TYPE]


def test_five_jobs_fill_the_four_gpu_instance_and_the_fifth_gets_its_own() -> None:
    quotes = market(SPOT_A, quad("a", 2.40), ON_DEMAND)
    launches = decide_packed(*(job(f"j{n}") for n in range(5)), quotes=quotes).launches
    assert [(launch.pool.instance_type, launch.job_ids) for launch in launches] == [
        (QUAD, ("j0", "j1", "j2", "j3")),
        (TYPE, ("j4",)),
    ]


def test_a_spot_job_fills_a_gpu_left_over_on_an_on_demand_launch() -> None:
    """The on-demand instance is sized for the jobs that need on-demand; a GPU it has left is
    already paid for, so a spot job takes it instead of buying spot."""
    quotes = market(SPOT_A, ON_DEMAND, quad("a", 5.40, Market.ON_DEMAND))  # $1.80 a job
    tight = [job(f"tight{n}", deadline_in=timedelta(hours=1), priority=9) for n in range(3)]
    decided = decide_packed(*tight, job("relaxed", priority=1), quotes=quotes)
    (launch,) = decided.launches
    assert launch.pool.market is Market.ON_DEMAND
    assert launch.pool.instance_type == QUAD
    assert launch.job_ids == ("tight0", "tight1", "tight2", "relaxed")
    assert launch.alternatives == ()


def test_pools_are_compared_on_what_the_video_costs_start_up_included() -> None:
    """A cheap slow GPU (a T4) against a dear fast one (an L40S), on the step-time model: a
    short video costs less on the T4 (the start-up weighs as much as the steps); a long one
    costs less on the L40S (four times the T4's pace for 3.5 times its price)."""
    t4 = PoolQuote(Pool("g4dn.xlarge", "us-east-1a", Market.ON_DEMAND), 0.526, 0.0)
    l40s = PoolQuote(Pool("g6e.xlarge", "us-east-1a", Market.ON_DEMAND), 1.861, 0.0)
    settings = PurchaseSettings(candidate_types=("g4dn.xlarge", "g6e.xlarge"))
    state = PlanInput(NOW, (), (), market(t4, l40s))
    short = JobDemand("short", 5, NOW, None, WorkShape("wan/wan2.1-t2v-1.3b", 832, 480, 33), 30)
    long = JobDemand("long", 5, NOW, None, WorkShape("wan/wan2.1-t2v-1.3b", 1280, 720, 81), 50)
    picks = {
        demand.job_id: pick_pool(
            state, settings, ThroughputModel(), demand, Market.ON_DEMAND, Counter()
        )
        for demand in (short, long)
    }
    assert picks["short"] is not None
    assert picks["long"] is not None
    assert picks["short"].quote.pool.instance_type == "g4dn.xlarge"
    assert picks["long"].quote.pool.instance_type == "g6e.xlarge"
    assert "start-up included" in picks["long"].why
    model, startup = ThroughputModel(), settings.boot_seconds + settings.model_load_seconds
    expected = 1.861 * (startup + model.seconds(long.shape, "l40s", 50)) / 3600
    assert cost_per_video(l40s, long, model, settings) == pytest.approx(expected)


def test_a_job_that_spans_four_gpus_buys_an_instance_with_four() -> None:
    quotes = market(SPOT_A, quad("a", 2.40), ON_DEMAND)
    spanning = replace(job("span"), gpus=4)
    (launch,) = decide_packed(spanning, quotes=quotes).launches
    assert launch.pool.instance_type == QUAD
    assert launch.job_ids == ("span",)
    # Its four GPUs are used: a one-GPU job after it gets an instance of its own.
    launches = decide_packed(spanning, job("one"), quotes=quotes).launches
    assert sorted((launch.pool.instance_type, launch.job_ids) for launch in launches) == [
        (QUAD, ("span",)),
        (TYPE, ("one",)),
    ]


def test_a_spanning_job_takes_free_gpus_only_where_enough_are_free_together() -> None:
    quotes = market(SPOT_A, quad("a", 2.40), ON_DEMAND)
    spanning = replace(job("span"), gpus=4)
    held = [  # two of its four GPUs busy
        InstanceView("i-quad", quad("a", 2.40).pool, 2.40, NOW - timedelta(hours=1), 4, 2),
    ]
    decided = plan(PlanInput(NOW, (spanning,), tuple(held), quotes), QUAD_SETTINGS, linear_pace())
    assert [launch.job_ids for launch in decided.launches] == [("span",)]


def test_a_job_no_candidate_type_can_hold_waits_naming_its_need_and_the_largest_gpu() -> None:
    huge = replace(
        job("huge"), min_vram_gib=70.0
    )  # an L40S (44.99 GiB as it reports it) is the largest here
    decided = decide(huge)
    assert decided.launches == ()
    (wait,) = decided.waits
    assert "needs 70 GiB per GPU" in wait.reason
    assert "44.99 GiB (g6e" in wait.reason
