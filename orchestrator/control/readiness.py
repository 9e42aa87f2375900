"""When each instance's worker first said hello: the cost ledger's end of its start-up (boot,
drivers, agent), and how its GPUs are split into slots where MIG splits them (the ledger
charges a slot's jobs its part of its GPU). Written once per instance; the set of instances
written is bounded."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from kernel.bounded import BoundedSet
from orchestrator.scheduling.registry import WorkerRegistry
from orchestrator.store.cost_facts import SlotShare

REMEMBERED = 100_000


class ReadinessStore(Protocol):
    def record_instance_ready(
        self, instance_id: str, at: datetime, layout: Sequence[SlotShare] = ()
    ) -> None: ...


class Readiness:
    def __init__(self, store: ReadinessStore, registry: WorkerRegistry) -> None:
        self._store, self._registry = store, registry
        self._written: BoundedSet[str] = BoundedSet(REMEMBERED)

    async def step(self) -> None:
        for instance_id, (at, gpus) in self._registry.first_hellos().items():
            if instance_id not in self._written:
                split = all(g.physical is not None for g in gpus)
                layout = [
                    SlotShare(g.index, g.physical or 0, g.compute_share) for g in gpus if split
                ]
                await asyncio.to_thread(self._store.record_instance_ready, instance_id, at, layout)
                self._written.add(instance_id)
