"""When each instance's worker first said hello: the cost ledger's end of its start-up (boot,
drivers, agent). Written once per instance; the set of instances written is bounded."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Protocol

from kernel.bounded import BoundedSet
from orchestrator.scheduling.registry import WorkerRegistry

REMEMBERED = 100_000


class ReadinessStore(Protocol):
    def record_instance_ready(self, instance_id: str, at: datetime) -> None: ...


class Readiness:
    def __init__(self, store: ReadinessStore, registry: WorkerRegistry) -> None:
        self._store, self._registry = store, registry
        self._written: BoundedSet[str] = BoundedSet(REMEMBERED)

    async def step(self) -> None:
        for instance_id, at in self._registry.first_hellos().items():
            if instance_id not in self._written:
                await asyncio.to_thread(self._store.record_instance_ready, instance_id, at)
                self._written.add(instance_id)
