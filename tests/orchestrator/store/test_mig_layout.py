"""An instance's MIG layout (each slot's GPU and part of it) is kept from its worker's first
hello, for the cost ledger; a later hello changes nothing, as with its ready time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kernel.fleet_facts import InstanceSeen
from kernel.market import Market
from orchestrator.store.cost_facts import SlotShare
from orchestrator.store.job_store import JobStore

AT = datetime(2026, 12, 5, 12, tzinfo=UTC)
INSTANCE = "i-0abc123456789def0"


def test_an_instances_mig_layout_is_kept_from_its_first_hello(store: JobStore) -> None:
    seen = InstanceSeen(INSTANCE, "p4d.24xlarge", "us-east-1a", Market.SPOT, AT, 8, "a100")
    store.cost_facts.record_instances_seen([seen])
    layout = [SlotShare(0, 0, 3 / 7), SlotShare(1, 0, 4 / 7), SlotShare(2, 1, 1.0)]
    store.cost_facts.record_instance_ready(INSTANCE, AT, layout)
    store.cost_facts.record_instance_ready(INSTANCE, AT + timedelta(hours=1), [])
    [life] = store.cost_facts.instance_lives(AT - timedelta(days=1), AT + timedelta(days=1))
    assert life.layout == tuple(layout)
    assert life.ready_at == AT
