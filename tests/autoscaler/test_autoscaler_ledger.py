"""The autoscaler and the cost ledger: what it launches is recorded as EC2 lists it, prices
as they change, and its budget reads today's spend back from the ledger, so a restarted
autoscaler still knows what today cost. Its metrics count launches and capacity errors."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from prometheus_client import CollectorRegistry

from autoscaler.ec2.fake import FakeEc2
from autoscaler.fleet_record import FleetRecorder
from autoscaler.loop import AutoscalerLoop
from autoscaler.metrics import AutoscalerMetrics
from kernel.clock import FakeClock
from kernel.fleet_facts import InstanceSeen, PriceSeen
from kernel.market import Market
from orchestrator.costs.fleet_record import StoreFleetRecord
from orchestrator.costs.ledger import CostLedger
from orchestrator.store.job_store import JobStore
from tests.support.autoscaling import autoscaler


def with_ledger(
    store: JobStore, clock: FakeClock, ec2: FakeEc2, registry: CollectorRegistry
) -> AutoscalerLoop:
    loop = autoscaler(store, clock, ec2)
    loop.recorder = FleetRecorder(
        StoreFleetRecord(store.cost_facts, CostLedger(store.cost_facts, clock))
    )
    loop.metrics = AutoscalerMetrics(registry)
    return loop


async def test_launches_are_recorded_as_ec2_lists_them_and_priced(
    queued_store: JobStore, trace_clock: FakeClock
) -> None:
    ec2, registry = FakeEc2(trace_clock), CollectorRegistry()
    loop = with_ledger(queued_store, trace_clock, ec2, registry)
    await loop.once()
    now = trace_clock.now()
    lives = queued_store.cost_facts.instance_lives(
        now - timedelta(hours=1), now + timedelta(seconds=1)
    )
    assert {life.instance_id for life in lives} == set(ec2.instances)
    assert all(life.gpu_family == "v100" and life.launched_at <= now for life in lives)
    pools = {life.pool for life in lives}
    prices = queued_store.cost_facts.price_changes(list(pools), now + timedelta(seconds=1))
    assert all(prices[pool] for pool in pools)
    assert registry.get_sample_value("framefleet_autoscaler_rounds_total") == 1
    launched = sum(
        registry.get_sample_value(
            "framefleet_autoscaler_launches_total",
            {"instance_type": "p3.2xlarge", "availability_zone": zone, "market": "spot"},
        )
        or 0
        for zone in loop.zones
    )
    assert launched == len(ec2.instances) == 3


async def test_a_restarted_autoscaler_keeps_todays_spend_and_its_budget(
    queued_store: JobStore, trace_clock: FakeClock
) -> None:
    now = trace_clock.now()
    midnight = datetime(now.year, now.month, now.day, tzinfo=UTC)
    # Before the restart: an on-demand instance ran from midnight and still runs.
    queued_store.cost_facts.record_prices(
        [PriceSeen("p3.2xlarge", "us-east-1a", Market.ON_DEMAND, midnight, Decimal("3.06"))]
    )
    queued_store.cost_facts.record_instances_seen(
        [
            InstanceSeen(
                "i-0aaaaaaaaaaaaaaaa",
                "p3.2xlarge",
                "us-east-1a",
                Market.ON_DEMAND,
                midnight,
                1,
                "v100",
            )
        ]
    )
    spent = float(CostLedger(queued_store.cost_facts, trace_clock).spent_today())
    hours = (now - midnight).total_seconds() / 3600
    ebs = 200 * 0.08 / 730  # its 200 GiB gp3 root volume, per hour
    assert abs(spent - (3.06 + ebs) * hours) < 1e-6
    ec2, registry = FakeEc2(trace_clock), CollectorRegistry()
    loop = with_ledger(queued_store, trace_clock, ec2, registry)
    loop.settings = replace(loop.settings, budget_per_day=spent + 0.5)
    plans = await loop.once()
    assert ec2.instances == {}
    assert all("spent today" in w.reason for w in plans[0].waits)
    assert registry.get_sample_value("framefleet_autoscaler_spend_today_usd") == spent
