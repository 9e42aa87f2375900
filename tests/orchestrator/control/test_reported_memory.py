"""Issue 46, defect 2: the catalogue's memory is a measured table, and a worker's report
overrides it once known. A whole GPU reporting less than the table (ECC on, a driver's reserve)
lowers its type's figure in the control plane and, through the store, in the autoscaler, so
that both decide "fits" by what the scheduler will see. A report far below is not learnt."""

from __future__ import annotations

import pytest

from autoscaler.demand import StoreDemand
from kernel.clock import FakeClock
from kernel.fleet_facts import InstanceSeen
from kernel.instance_types import L4_GIB, kind_of
from kernel.market import Market
from kernel.worker_protocol import Channel, topic
from orchestrator.control.identity import LEAST_LEARNT_SHARE
from orchestrator.store.job_store import JobStore
from tests.support.control_plane import OTHER, OWNER, hello, plane_in_memory

pytestmark = pytest.mark.usefixtures("shipped_catalogue")


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
    await plane.on_message(topic(OTHER, Channel.HELLO), hello(OTHER, clock, far_below))
    assert kind_of("g6.xlarge").vram_gib == L4_GIB  # a fault, not a measurement
    with_ecc = L4_GIB - 0.5
    await plane.on_message(topic(OWNER, Channel.HELLO), hello(OWNER, clock, with_ecc))
    assert kind_of("g6.xlarge").vram_gib == with_ecc

    kinds = {k.instance_type: k for k in StoreDemand(store).instance_kinds()}
    assert kinds["g6.xlarge"].vram_gib == with_ecc  # the autoscaler reads it every KINDS_REFRESH
