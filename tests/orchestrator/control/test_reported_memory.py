"""Issue 46, defect 2: the catalogue's memory is a measured table, and a worker's report
overrides it once known. A whole GPU reporting less than the table (ECC on, a driver's reserve)
lowers its type's figure in the control plane and, through the store, in the autoscaler, so
that both decide "fits" by what the scheduler will see. A report far below is not learnt."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from autoscaler.demand import StoreDemand
from kernel.clock import FakeClock
from kernel.fleet_facts import InstanceSeen
from kernel.instance_types import CATALOG, L4_GIB, kind_of
from kernel.market import Market
from kernel.worker_protocol import Channel, GpuInfo, Hello, topic
from orchestrator.control.identity import LEAST_LEARNT_SHARE
from orchestrator.store.job_store import JobStore
from tests.support.control_plane import OTHER, OWNER, plane_in_memory


@pytest.fixture(autouse=True)
def shipped_catalogue() -> Iterator[None]:
    before = dict(CATALOG)
    yield
    CATALOG.clear()
    CATALOG.update(before)


def hello(worker_id: str, vram_gib: float, clock: FakeClock) -> bytes:
    message = Hello(
        worker_id=worker_id,
        sent_at=clock.now(),
        instance_id=worker_id,
        instance_type="g6.xlarge",
        availability_zone="us-east-1a",
        market="spot",
        gpus=(GpuInfo(index=0, family="l4", vram_gib=vram_gib),),
        agent_version="test",
    )
    return message.model_dump_json().encode()


def launched(store: JobStore, clock: FakeClock, instance_id: str) -> None:
    seen = InstanceSeen(instance_id, "g6.xlarge", "us-east-1a", Market.SPOT, clock.now(), 1, "l4")
    store.cost_facts.record_instances_seen([seen])


async def test_a_worker_reporting_less_memory_lowers_its_type_for_the_autoscaler(
    store: JobStore, clock: FakeClock
) -> None:
    plane, _ = plane_in_memory(store, clock)
    launched(store, clock, OWNER)
    launched(store, clock, OTHER)
    far_below = L4_GIB * LEAST_LEARNT_SHARE - 1
    await plane.on_message(topic(OTHER, Channel.HELLO), hello(OTHER, far_below, clock))
    assert kind_of("g6.xlarge").vram_gib == L4_GIB  # a fault, not a measurement
    with_ecc = L4_GIB - 0.5
    await plane.on_message(topic(OWNER, Channel.HELLO), hello(OWNER, with_ecc, clock))
    assert kind_of("g6.xlarge").vram_gib == with_ecc

    kinds = {k.instance_type: k for k in StoreDemand(store).instance_kinds()}
    assert kinds["g6.xlarge"].vram_gib == with_ecc  # the autoscaler reads it every KINDS_REFRESH
