"""The EC2 adapter against a real HTTP endpoint (moto server): launch templates, CreateFleet,
RunInstances, tags, TerminateInstances; the live market's spot price history and its dated
fallback when the Pricing API does not answer (moto has none)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import aioboto3
import pytest
from types_aiobotocore_ec2.client import EC2Client

from autoscaler.actuation import Actuator
from autoscaler.ec2.adapter import Ec2FleetAdapter
from autoscaler.ec2.ports import FLEET_TAG, MARKET_TAG, REASON_TAG, LaunchRequest
from autoscaler.market.advisor import SpotAdvisor
from autoscaler.market.capacity import CapacityMemory
from autoscaler.market.live import LiveMarket
from autoscaler.market.on_demand import fallback_price
from autoscaler.pools import Pool
from autoscaler.reconcile import Reconciler
from autoscaler.snapshot import Launch, Plan
from kernel.clock import FakeClock
from kernel.market import Market

REGION = "us-east-1"
SPOT = Pool("g6e.xlarge", "us-east-1b", Market.SPOT)
ON_DEMAND = Pool("g5.xlarge", "us-east-1c", Market.ON_DEMAND)


@pytest.fixture
async def ec2(moto_endpoint: str) -> AsyncIterator[EC2Client]:
    session = aioboto3.Session(region_name=REGION)
    async with session.client("ec2", endpoint_url=moto_endpoint) as client:
        yield client


async def adapter_with_template(ec2: EC2Client, use_create_fleet: bool = True) -> Ec2FleetAdapter:
    images = await ec2.describe_images(Owners=["amazon"])
    adapter = Ec2FleetAdapter(ec2, f"framefleet-worker-{uuid.uuid4().hex[:8]}", use_create_fleet)
    first = await adapter.ensure_launch_template(images["Images"][0]["ImageId"])
    assert await adapter.ensure_launch_template("ami-ignored") == first  # created once
    return adapter


def request(fleet_id: str, pool: Pool, token: str = "") -> LaunchRequest:
    return LaunchRequest(
        fleet_id,
        pool.market,
        (pool,),
        2,
        token or f"ff-{uuid.uuid4()}",
        f"job j1 (priority 5): no deadline: spot; cheapest spot per video: {pool}",
        ("j1",),
    )


async def test_create_fleet_launches_tagged_spot_instances_and_terminates_them(
    ec2: EC2Client,
) -> None:
    adapter = await adapter_with_template(ec2)
    fleet_id = f"fleet-{uuid.uuid4().hex[:8]}"
    result = await adapter.launch(request(fleet_id, SPOT))
    assert result.errors == ()
    assert len(result.instances) == 2
    for instance in result.instances:
        assert instance.pool.instance_type == "g6e.xlarge"
        assert instance.pool.market is Market.SPOT
        assert instance.tags[FLEET_TAG] == fleet_id
        assert instance.tags[MARKET_TAG] == "spot"
        assert "cheapest spot per video" in instance.tags[REASON_TAG]
    found = await adapter.describe(fleet_id)
    assert {i.instance_id for i in found} == {i.instance_id for i in result.instances}
    assert await adapter.describe("another-fleet") == []
    await adapter.terminate([i.instance_id for i in result.instances])
    assert await adapter.describe(fleet_id) == []


async def test_run_instances_launches_on_demand_in_the_asked_zone(ec2: EC2Client) -> None:
    adapter = await adapter_with_template(ec2, use_create_fleet=False)
    fleet_id = f"fleet-{uuid.uuid4().hex[:8]}"
    result = await adapter.launch(request(fleet_id, ON_DEMAND))
    assert len(result.instances) == 2
    for instance in result.instances:
        assert instance.pool == ON_DEMAND
        assert instance.tags[MARKET_TAG] == "on-demand"
        assert instance.state in {"pending", "running"}
    await adapter.terminate([i.instance_id for i in result.instances])


async def test_reconcile_adopts_what_exists_and_terminates_orphans_once(ec2: EC2Client) -> None:
    adapter = await adapter_with_template(ec2)
    fleet_id = f"fleet-{uuid.uuid4().hex[:8]}"
    launched = (await adapter.launch(request(fleet_id, SPOT))).instances
    clock = FakeClock(datetime.now(UTC))
    reconciler = Reconciler(adapter, fleet_id, clock, grace=timedelta(minutes=15))
    with_worker, without = launched[0].instance_id, launched[1].instance_id
    first = await reconciler.reconcile(workers_seen={with_worker})
    assert sorted(first.adopted) == sorted([with_worker, without])  # a restarted autoscaler
    assert first.orphans_terminated == []  # still within the grace period
    clock.advance(16 * 60)
    second = await reconciler.reconcile(workers_seen={with_worker})
    assert second.orphans_terminated == [without]
    third = await reconciler.reconcile(workers_seen={with_worker})
    assert (third.adopted, third.forgotten, third.orphans_terminated) == ([], [], [])
    assert set(reconciler.ledger) == {with_worker}
    await adapter.terminate([with_worker])
    fourth = await reconciler.reconcile(workers_seen=set())
    assert fourth.forgotten == [with_worker]


async def test_live_market_reads_spot_history_and_falls_back_to_the_dated_table(
    ec2: EC2Client, moto_endpoint: str
) -> None:
    session = aioboto3.Session(region_name=REGION)
    async with session.client("pricing", endpoint_url=moto_endpoint) as pricing:
        clock = FakeClock(datetime.now(UTC))
        capacity = CapacityMemory(clock)
        market = LiveMarket(ec2, pricing, SpotAdvisor.shipped(), capacity, clock)
        capacity.mark(Pool("g5.xlarge", "us-east-1a", Market.SPOT), "InsufficientInstanceCapacity")
        spot_a = Pool("g5.xlarge", "us-east-1a", Market.SPOT)
        spot_b = Pool("g5.xlarge", "us-east-1b", Market.SPOT)
        snapshot = capacity.screen(await market.snapshot([spot_a, spot_b, ON_DEMAND]))
    assert snapshot.quotes[spot_b].price_per_hour > 0  # moto's (constant) history price
    assert snapshot.quotes[spot_b].available
    assert snapshot.quotes[spot_b].interruptions_per_hour > 0  # from the advisor snapshot
    assert not snapshot.quotes[spot_a].available
    assert "InsufficientInstanceCapacity" in snapshot.quotes[spot_a].why_unavailable
    assert snapshot.quotes[ON_DEMAND].price_per_hour == fallback_price(REGION, "g5.xlarge")


@pytest.mark.parametrize("use_create_fleet", [True, False])
async def test_a_launch_goes_to_the_subnet_of_its_zone(
    ec2: EC2Client, use_create_fleet: bool
) -> None:
    """A VPC deployment names a subnet per zone; the instance lands in that subnet's zone
    (moto, like a VPC account, places by subnet)."""
    found = await ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]}])
    subnets = {s["AvailabilityZone"]: s["SubnetId"] for s in found["Subnets"]}
    plain = await adapter_with_template(ec2, use_create_fleet)
    adapter = Ec2FleetAdapter(ec2, plain._template, use_create_fleet, subnets)
    pool = Pool("p3.2xlarge", "us-east-1f", Market.SPOT)
    result = await adapter.launch(request(f"fleet-{uuid.uuid4().hex[:6]}", pool))
    assert result.instances
    assert {i.pool.availability_zone for i in result.instances} == {"us-east-1f"}
    described = await ec2.describe_instances(InstanceIds=[result.instances[0].instance_id])
    subnet = described["Reservations"][0]["Instances"][0]["SubnetId"]
    assert subnet == subnets["us-east-1f"]


@pytest.mark.parametrize("use_create_fleet", [True, False])
async def test_a_gpu_family_with_a_template_of_its_own_launches_from_it(
    ec2: EC2Client, use_create_fleet: bool
) -> None:
    """infra's worker_fleet module can give a family its own image (its driver); the other
    families launch from the default template."""
    images = [i["ImageId"] for i in (await ec2.describe_images(Owners=["amazon"]))["Images"]]
    default = await adapter_with_template(ec2, use_create_fleet)
    l40s = Ec2FleetAdapter(ec2, f"framefleet-l40s-{uuid.uuid4().hex[:8]}")
    await l40s.ensure_launch_template(images[1])
    adapter = Ec2FleetAdapter(
        ec2, default._template, use_create_fleet, family_templates={"l40s": l40s._template}
    )
    assert adapter.template_for(SPOT) == l40s._template  # g6e.xlarge: L40S
    assert adapter.template_for(ON_DEMAND) == default._template  # g5.xlarge: A10G
    fleet_id = f"fleet-{uuid.uuid4().hex[:8]}"
    launched = {}
    for pool in (SPOT, ON_DEMAND):
        (instance, *_) = (await adapter.launch(request(fleet_id, pool))).instances
        described = await ec2.describe_instances(InstanceIds=[instance.instance_id])
        launched[pool.instance_type] = described["Reservations"][0]["Instances"][0]["ImageId"]
    assert launched["g6e.xlarge"] == images[1]
    assert launched["g5.xlarge"] != images[1]


async def test_a_spot_launch_offers_create_fleet_every_equally_good_pool(ec2: EC2Client) -> None:
    """The actuator sends the plan's pool and its alternatives as CreateFleet overrides, and
    EC2 starts the instance from them."""
    adapter = await adapter_with_template(ec2)
    others = (
        Pool("g6e.xlarge", "us-east-1c", Market.SPOT),
        Pool("g6.xlarge", "us-east-1a", Market.SPOT),
    )
    launch = Launch(SPOT, 0.7, ("j1",), "job j1: spot", others)
    clock = FakeClock(datetime(2026, 6, 1, tzinfo=UTC))
    done = await Actuator(adapter, CapacityMemory(clock), "overrides", clock).execute(
        Plan(launches=(launch,))
    )
    ((_, instance),) = done.launched
    # EC2 starts it in one of the overrides; moto's CreateFleet may pair one override's type
    # with another's zone, so only that much is checked here.
    offered = (SPOT, *others)
    assert instance.pool.instance_type in {p.instance_type for p in offered}
    assert instance.pool.availability_zone in {p.availability_zone for p in offered}
    assert [i.instance_id for i in await adapter.describe("overrides")] == [instance.instance_id]
