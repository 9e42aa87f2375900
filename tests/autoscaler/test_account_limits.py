"""Account limits are facts, not failures: a quota, instance-limit or address error holds back
what it limits (the quota's pools, the subnet's zone) and the round's other launches go on; a
quota read from Service Quotas is planned within, and a job beyond it waits naming it."""

from __future__ import annotations

from dataclasses import replace

from botocore.exceptions import ClientError
from prometheus_client import CollectorRegistry

from autoscaler.actuation import Actuator
from autoscaler.ec2.adapter import _refusal, fleet_errors
from autoscaler.ec2.fake import FakeEc2
from autoscaler.ec2.ports import LaunchRequest
from autoscaler.market.capacity import CapacityMemory
from autoscaler.market.limits import AccountLimits
from autoscaler.metrics import AutoscalerMetrics
from autoscaler.pools import Pool
from autoscaler.snapshot import Launch, Plan
from kernel.clock import FakeClock
from kernel.market import Market
from kernel.service_quotas import GPU_VCPU_QUOTAS, VcpuQuota, quota_of
from orchestrator.store.job_store import JobStore
from tests.support.autoscaling import autoscaler

G_ON_DEMAND = Pool("g6.xlarge", "us-east-1a", Market.ON_DEMAND)
P_SPOT_CODE = "L-7212CCBC"  # All P Spot Instance Requests
P_SPOT_QUOTA = f"the quota 'All P Spot Instance Requests' ({P_SPOT_CODE})"


def request(*pools: Pool) -> LaunchRequest:
    return LaunchRequest("fleet", pools[0].market, pools, 1, "token", "why")


def test_each_gpu_type_counts_against_its_class_and_market_quota() -> None:
    assert quota_of("g6e.xlarge", Market.ON_DEMAND).code == "L-DB2E81BA"  # type: ignore[union-attr]
    assert quota_of("gr6.4xlarge", Market.SPOT).code == "L-3819A6DF"  # type: ignore[union-attr]
    assert quota_of("p5.48xlarge", Market.SPOT).code == P_SPOT_CODE  # type: ignore[union-attr]
    assert quota_of("p4d.24xlarge", Market.ON_DEMAND).code == "L-417A185B"  # type: ignore[union-attr]
    assert quota_of("m7i.large", Market.ON_DEMAND) is None


def test_create_fleet_errors_tell_a_limit_from_a_pool_short_of_capacity() -> None:
    spot = Pool("g6.xlarge", "us-east-1a", Market.SPOT)
    found = [
        {
            "LaunchTemplateAndOverrides": {"Overrides": {"InstanceType": "g6.xlarge"}},
            "ErrorCode": code,
            "ErrorMessage": "no",
        }
        for code in ("MaxSpotInstanceCountExceeded", "InsufficientInstanceCapacity", "Weird")
    ]
    capacity, limits, others = fleet_errors(found, request(spot), {})
    assert [e.code for e in capacity] == ["InsufficientInstanceCapacity"]
    assert [e.code for e in limits] == ["MaxSpotInstanceCountExceeded"]
    assert limits[0].scope.quota == quota_of("g6.xlarge", Market.SPOT)
    assert len(others) == 1
    assert "Weird" in others[0]


def test_a_refused_launch_call_names_what_the_limit_covers() -> None:
    def refused(code: str) -> ClientError:
        return ClientError({"Error": {"Code": code, "Message": "no"}}, "RunInstances")

    vcpus = _refusal(refused("VcpuLimitExceeded"), (G_ON_DEMAND,))
    assert vcpus is not None
    assert vcpus.limits[0].scope.quota is not None
    assert "Running On-Demand G and VT instances" in str(vcpus.limits[0])
    subnet = _refusal(refused("InsufficientFreeAddressesInSubnet"), (G_ON_DEMAND,))
    assert subnet is not None
    scope = subnet.limits[0].scope
    assert scope.covers("p5.48xlarge", "us-east-1a", Market.SPOT)  # all of the zone
    assert not scope.covers("g6.xlarge", "us-east-1b", Market.ON_DEMAND)
    assert _refusal(refused("UnauthorizedOperation"), (G_ON_DEMAND,)) is None  # raised typed


async def test_one_launch_failing_does_not_stop_the_rounds_other_launches() -> None:
    clock = FakeClock()
    ec2 = FakeEc2(clock)
    broken = Pool("g5.xlarge", "us-east-1a", Market.ON_DEMAND)
    limited = Pool("g6.xlarge", "us-east-1a", Market.SPOT)
    fine = Pool("p3.2xlarge", "us-east-1a", Market.ON_DEMAND)
    ec2.broken.add(broken)
    ec2.vcpu_quotas["L-3819A6DF"] = 0  # All G and VT Spot Instance Requests
    actuator = Actuator(ec2, CapacityMemory(clock), "fleet", clock)
    plan = Plan(
        launches=tuple(
            Launch(pool, 1.0, (f"j{n}",), "why")
            for n, pool in enumerate(
                [broken, limited, replace(limited, availability_zone="b"), fine]
            )
        )
    )

    done = await actuator.execute(plan)

    assert [instance.pool for _, instance in done.launched] == [fine]
    assert len(done.failed) == 3
    # The limit holds every pool of its quota (the second G spot launch was not even tried),
    # and nothing else.
    assert len(ec2.requests) == 3
    assert actuator.limits.holding(Pool("g6e.12xlarge", "us-west-2c", Market.SPOT))
    assert actuator.limits.holding(G_ON_DEMAND) is None
    clock.advance(16 * 60)
    assert actuator.limits.holding(limited) is None  # until it frees, tried again


class Quotas:
    def __init__(self, vcpus: dict[str, float]) -> None:
        self.vcpus, self.reads = vcpus, 0

    async def vcpu_quota(self, quota: VcpuQuota) -> float | None:
        self.reads += 1
        return self.vcpus.get(quota.code)


async def test_a_quota_error_holds_its_quota_and_the_jobs_wait_naming_it(
    queued_store: JobStore, trace_clock: FakeClock
) -> None:
    ec2 = FakeEc2(trace_clock)
    ec2.vcpu_quotas[P_SPOT_CODE] = 8  # one p3.2xlarge; the autoscaler did not read it
    loop = autoscaler(queued_store, trace_clock, ec2)
    registry = CollectorRegistry()
    loop.metrics = AutoscalerMetrics(registry)

    plans = await loop.once()

    assert len(ec2.instances) == 1  # the other launches were tried, then planned around
    waits = plans[-1].waits
    assert len(waits) == 2
    assert all(w.limit == P_SPOT_QUOTA for w in waits)
    assert all("All P Spot Instance Requests" in w.reason for w in waits)
    assert all(P_SPOT_CODE in w.reason for w in waits)
    beyond = registry.get_sample_value(
        "framefleet_autoscaler_jobs_beyond_limits", {"limit": P_SPOT_QUOTA}
    )
    assert beyond == 2  # what /metrics shows, and the alert reads
    requests = len(ec2.requests)
    await loop.once()  # held: EC2 is not asked again while the hold lasts
    assert len(ec2.requests) == requests


async def test_the_plan_stays_within_the_quotas_it_read(
    queued_store: JobStore, trace_clock: FakeClock
) -> None:
    ec2 = FakeEc2(trace_clock)
    quotas = Quotas({P_SPOT_CODE: 16})  # two p3.2xlarge of 8 vCPUs
    loop = autoscaler(queued_store, trace_clock, ec2)
    loop.actuator.limits = AccountLimits(trace_clock, quotas)

    plans = await loop.once()

    assert len(plans[0].launches) == 2
    assert len(ec2.instances) == 2
    assert len(ec2.requests) == 2  # no launch EC2 had to refuse
    (wait,) = plans[0].waits
    assert wait.limit == P_SPOT_QUOTA
    assert "0 vCPUs of room" in wait.reason
    assert quotas.reads == len(GPU_VCPU_QUOTAS)
    await loop.once()
    assert quotas.reads == len(GPU_VCPU_QUOTAS)  # read again only after an hour
    uses = {
        u.quota.code: u
        for u in loop.actuator.limits.uses(ec2.instances[i].pool for i in ec2.instances)
    }
    assert uses[P_SPOT_CODE].vcpus == 16
    assert uses[P_SPOT_CODE].used == 16
