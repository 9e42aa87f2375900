"""Issue 46, defect 8: the catalogue comes from EC2's DescribeInstanceTypes (moto in server mode
answers with EC2's own data), is kept in the store for the control plane and for a start when
EC2 does not answer, and an operator may name any GPU type of a known family. Before, the
catalogue was a hard-coded table and naming another type raised at the first round."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aioboto3
import pytest
from aiobotocore.config import AioConfig
from types_aiobotocore_ec2.client import EC2Client

from autoscaler.ec2.fake import FakeEc2
from autoscaler.ec2.instance_kinds import describe_gpu_types
from framefleet.instance_catalogue import learn_candidate_types
from kernel.clock import FakeClock
from kernel.errors import ConfigurationError
from kernel.instance_types import CATALOG, H100_GIB, kind_of
from kernel.market import GpuFamily
from orchestrator.store.job_store import JobStore
from tests.support.autoscaling import autoscaler

REGION = "us-east-1"


@pytest.fixture
async def ec2(moto_endpoint: str) -> AsyncIterator[EC2Client]:
    session = aioboto3.Session(region_name=REGION)
    async with session.client("ec2", endpoint_url=moto_endpoint) as client:
        yield client


pytestmark = pytest.mark.usefixtures("shipped_catalogue")


async def test_ec2_describes_every_shipped_type_as_the_table_has_it(ec2: EC2Client) -> None:
    names = sorted(CATALOG)
    kinds, refused = await describe_gpu_types(ec2, names)
    assert {kind.instance_type: kind for kind in kinds} == {
        name: CATALOG[name] for name in names if name not in refused
    }
    # EC2 (and so moto's copy of its data) no longer describes the retired V100 types: the
    # shipped table keeps them for an account that still has them.
    assert set(refused) <= {"p3.2xlarge", "p3.8xlarge"}


async def test_an_operator_may_name_any_gpu_type_of_a_known_family(
    ec2: EC2Client, store: JobStore
) -> None:
    with pytest.raises(ConfigurationError):
        kind_of("p5.4xlarge")
    await learn_candidate_types(ec2, store.instance_kinds, ["g6e.xlarge", "p5.4xlarge"])
    one_h100 = kind_of("p5.4xlarge")
    assert (one_h100.family, one_h100.gpus, one_h100.vram_gib) == (GpuFamily.H100, 1, H100_GIB)
    # The control plane vets a p5.4xlarge worker's hello by the store's copy.
    assert one_h100 in store.instance_records.described_kinds()


async def test_a_type_that_is_no_gpu_type_here_is_a_configuration_error(
    ec2: EC2Client, store: JobStore
) -> None:
    with pytest.raises(ConfigurationError) as refused:
        await learn_candidate_types(
            ec2, store.instance_kinds, ["g6e.xlarge", "m5.large", "p6-b200.48xlarge"]
        )
    assert "m5.large: EC2 lists no GPU for it" in str(refused.value)
    assert "p6-b200.48xlarge: its GPU (B200) is not a family FrameFleet knows" in str(refused.value)


async def test_without_ec2_the_store_copy_is_used(ec2: EC2Client, store: JobStore) -> None:
    await learn_candidate_types(ec2, store.instance_kinds, ["p5.4xlarge"])
    CATALOG.pop("p5.4xlarge")
    session = aioboto3.Session(region_name=REGION)
    closed = AioConfig(retries={"max_attempts": 1}, connect_timeout=1)
    async with session.client("ec2", endpoint_url="http://127.0.0.1:9", config=closed) as gone:
        await learn_candidate_types(gone, store.instance_kinds, ["p5.4xlarge"])
    assert kind_of("p5.4xlarge").gpus == 1


async def test_the_autoscaler_buys_by_the_memory_workers_reported(
    queued_store: JobStore, trace_clock: FakeClock
) -> None:
    # The control plane lowered the type's figure from a worker's hello (ECC on).
    queued_store.instance_records.lower_memory(kind_of("p3.2xlarge"), 15.5)
    loop = autoscaler(queued_store, trace_clock, FakeEc2(trace_clock))
    await loop.once()
    assert kind_of("p3.2xlarge").vram_gib == 15.5
