"""A spot trace replayed in compressed time: the clock every process shares, the market the
autoscaler reads, the capacity errors EC2 answers with, and the interruptions the local fleet
gets (notice through IMDS and EventBridge, or none)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from pathlib import Path

from autoscaler.ec2.fake import FakeEc2
from autoscaler.fleet_record import PriceTape
from autoscaler.market.replay import NO_CAPACITY, ReplayedMarket, TraceCapacityGate
from autoscaler.market.trace import TraceMarket
from autoscaler.pools import Pool
from framefleet.demo_report import read_timeline
from framefleet.local_fleet import LocalFleet, LocalFleetSettings, Timeline
from framefleet.spot_replay import ReplaySettings, SpotReplay
from kernel.clock import FakeClock
from kernel.fleet_facts import InstanceSeen
from kernel.market import Market
from kernel.replay_clock import ReplayClock
from orchestrator.costs.ledger import CostLedger, CostSettings
from orchestrator.interruptions.events import SPOT_WARNING, STATE_CHANGE
from orchestrator.store.job_store import JobStore
from tests.support.replay import DOWN, SPEED, START, UP, RecordedEvents, launch, trace


def replay_at(wall: FakeClock) -> ReplayClock:
    return ReplayClock(START, wall.now(), SPEED, wall)


def test_the_replay_clock_runs_speed_times_faster_than_the_wall() -> None:
    wall = FakeClock()
    replay = replay_at(wall)
    wall.advance(3)
    assert replay.now() == START + timedelta(seconds=300)
    assert replay.wall_seconds(120) == 1.2


async def test_the_market_is_quoted_in_wall_time() -> None:
    wall = FakeClock()
    replay = replay_at(wall)
    wall.advance(1.5)  # tick 1
    recorded = TraceMarket(trace(), replay)
    snapshot = await ReplayedMarket(recorded, replay, wall).snapshot([UP, DOWN])
    at_trace_speed = await recorded.snapshot([UP, DOWN])
    assert snapshot.at == wall.now()
    for pool in (UP, DOWN):
        quote, recorded_quote = snapshot.quotes[pool], at_trace_speed.quotes[pool]
        assert quote.price_per_hour == recorded_quote.price_per_hour
        assert quote.interruptions_per_hour == recorded_quote.interruptions_per_hour * SPEED


async def test_a_spot_launch_where_the_trace_has_no_capacity_fails_with_ec2s_code() -> None:
    wall = FakeClock()
    replay = replay_at(wall)  # tick 0: 1a has capacity, 1c has none
    ec2 = FakeEc2(wall)
    gate = TraceCapacityGate(ec2, TraceMarket(trace(), replay), replay)
    refused = await gate.launch(launch((DOWN,)))
    assert refused.instances == ()
    assert [(e.pool, e.code) for e in refused.errors] == [(DOWN, NO_CAPACITY)]
    assert await ec2.describe("demo") == []  # EC2 was not asked
    mixed = await gate.launch(launch((DOWN, UP)))
    assert [i.pool for i in mixed.instances] == [UP]
    assert [e.pool for e in mixed.errors] == [DOWN]
    on_demand = Pool("p3.2xlarge", "us-east-1c", Market.ON_DEMAND)
    assert (await gate.launch(launch((on_demand,)))).instances


async def test_a_zone_losing_capacity_reclaims_its_spot_workers_with_and_without_notice(
    tmp_path: Path,
) -> None:
    wall = FakeClock()
    replay = replay_at(wall)
    ec2 = FakeEc2(wall)
    for pool in (UP, UP, Pool("p3.2xlarge", "us-east-1a", Market.ON_DEMAND), DOWN):
        await ec2.launch(launch((pool,)))
    timeline = Timeline(tmp_path / "timeline.jsonl", wall)
    fleet = LocalFleet(ec2, LocalFleetSettings("demo", tmp_path, timeline.path), wall, timeline)
    events = RecordedEvents()
    spot = SpotReplay(fleet, ec2, events, trace(), replay, wall, ReplaySettings(4.0, 2))

    async def poll() -> None:
        await spot.on_poll({i.instance_id: i for i in await ec2.describe("demo")})

    await poll()  # tick 0: the first look at the market reclaims nothing
    wall.advance(1)
    await poll()  # tick 1: every zone still has capacity
    assert events.sent == []
    wall.advance(1)
    await poll()  # tick 2: us-east-1a goes 1 -> 0
    assert spot.interruptions == 2
    live = {i.pool for i in await ec2.describe("demo")}
    # The silent one is gone at once; the noticed one still runs, with its warning sent.
    assert [kind for kind, _ in events.sent] == [SPOT_WARNING, STATE_CHANGE]
    assert UP in live
    assert DOWN in live
    await spot.notices_run_out()  # 4 s on the injected clock
    assert {i.pool for i in await ec2.describe("demo")} == {
        Pool("p3.2xlarge", "us-east-1a", Market.ON_DEMAND),
        DOWN,
    }
    kinds = [entry["kind"] for entry in read_timeline(timeline.path)]
    assert kinds.count("spot_reclaimed") == 2
    assert kinds.count("spot_notice") == 1
    assert [kind for kind, _ in events.sent] == [SPOT_WARNING, STATE_CHANGE, STATE_CHANGE]


async def test_the_demo_bills_wall_clock_hours_at_the_replayed_prices(store: JobStore) -> None:
    """One set of books: the demo's email reads the store on the wall clock, as the console,
    the API and the export do; the prices are the trace's, replayed."""
    wall = FakeClock()
    replay = replay_at(wall)
    started = wall.now()
    pool = Pool("p3.2xlarge", "us-east-1c", Market.SPOT)
    market, tape = ReplayedMarket(TraceMarket(trace(), replay), replay, wall), PriceTape()
    # 1c: 2 ticks at $2/h then 2 at $4/h, 100 s each (a wall second each).
    store.cost_facts.record_instances_seen(
        [
            InstanceSeen(
                "i-0123456789abcdef0", "p3.2xlarge", "us-east-1c", Market.SPOT, started, 1, "v100"
            )
        ]
    )
    for _ in range(4):
        store.cost_facts.record_prices(tape.changes(await market.snapshot([pool])))
        wall.advance(1)
    store.cost_facts.record_instance_ended("i-0123456789abcdef0", wall.now(), "reclaimed")
    ledger = CostLedger(store.cost_facts, wall, CostSettings(ebs_usd_per_gib_month=Decimal(0)))
    period = ledger.period(started, wall.now())
    assert period.total == Decimal(2 * 2 + 2 * 4) / 3600
    assert sum(line.gpu_seconds for line in period.lines) == 4
