"""How often a job should checkpoint on its worker: the Young/Daly interval of the worker's
spot pool, from the interruption rate the autoscaler measured for that pool (the store's
`pool_rates`). The control plane sends the pool's mean time between interruptions with each
assignment; a worker on on-demand capacity, or on a pool never measured, gets none and uses its
own setting."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Protocol

from kernel.clock import Clock
from kernel.market import Market
from orchestrator.scheduling.registry import WorkerRegistry

# The rates move slowly (a pool's interruptions over days): one read now and then is enough.
REFRESH = timedelta(seconds=30)


class PoolRates(Protocol):
    """Each pool's interruptions per hour, as the autoscaler last recorded them."""

    def pool_rates(self) -> dict[tuple[str, str], float]: ...


class CheckpointPace:
    def __init__(self, store: PoolRates, registry: WorkerRegistry, clock: Clock) -> None:
        self._store, self._registry, self._clock = store, registry, clock
        self._rates: dict[tuple[str, str], float] = {}
        self._read_at: datetime | None = None

    async def refresh(self) -> None:
        now = self._clock.now()
        if self._read_at is None or now - self._read_at >= REFRESH:
            self._rates = await asyncio.to_thread(self._store.pool_rates)
            self._read_at = now

    def mtbi_seconds(self, worker_id: str) -> float | None:
        hello = self._registry.hello(worker_id)
        if hello is None or hello.market is not Market.SPOT:
            return None
        rate = self._rates.get((hello.instance_type, hello.availability_zone), 0.0)
        return 3600.0 / rate if rate > 0 else None
