"""What EventBridge says about instances, as the control plane acts on it.

Every replica reads the interruptions queue and records what it learned in the instance's one
record (warned, drained, gone), so the SQS message is settled and every replica and the
autoscaler see it. The leader acts at once; a standby's leader acts on the record at its next
tick (`drains`).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from kernel.clock import Clock
from kernel.job_record import DrainKind
from orchestrator.control.job_events import requeue
from orchestrator.control.job_mover import JobMover
from orchestrator.control.leadership import ReplicaRole
from orchestrator.control.settings import ACTOR, ControlStore
from orchestrator.scheduling.registry import WorkerRegistry
from orchestrator.scheduling.worker_health import WorkerHealth

# How far back gone instances are loaded at start (what a retained hello can be older than).
GONE_MEMORY = timedelta(days=30)


class InstanceEvents:
    """Spot notices, rebalance recommendations, terminations and workers gone: what they mean
    for the instance's record and for the jobs on it."""

    def __init__(
        self,
        store: ControlStore,
        clock: Clock,
        registry: WorkerRegistry,
        mover: JobMover,
        lock: asyncio.Lock,
        role: ReplicaRole,
    ) -> None:
        self._store = store
        self._clock = clock
        self._instances = store.instance_records
        self._registry = registry
        self._mover = mover
        self._lock = lock  # the service's: one writer at a time inside this replica
        self._role = role

    async def remember_gone_instances(self) -> None:
        """Gone instances' retained hellos are refused."""
        since = self._clock.now() - GONE_MEMORY
        for instance_id in await asyncio.to_thread(self._instances.gone_since, since):
            self._registry.instance_gone(instance_id)

    async def interrupt(self, worker_id: str, reason: str) -> None:
        """A spot notice: no new work there; its jobs checkpoint now and move when durable."""
        self._registry.mark(worker_id, WorkerHealth.INTERRUPTED, reason)
        await self.move_jobs_off(worker_id, reason)

    async def move_jobs_off(self, worker_id: str, reason: str) -> None:
        placements = await asyncio.to_thread(self._store.placements)
        await self._mover.move_off(placements, lambda p: p.worker_id == worker_id, reason)

    async def worker_gone(self, worker_id: str, reason: str) -> None:
        """Lost without (further) notice: its jobs resume elsewhere from their checkpoint."""
        await self._mover.commit(
            [
                (p.job, requeue(p.job, f"{reason} ({worker_id})"), None)
                for p in await asyncio.to_thread(self._store.placements)
                if p.worker_id == worker_id
            ]
        )

    def leads(self) -> bool:
        return self._role.leads()

    async def interrupt_instance(self, instance_id: str, reason: str) -> list[str]:
        """A spot warning: the instance's record says so at once, on any replica (its GPUs are
        no capacity for the autoscaler, which buys the replacement in its next round); the
        leader checkpoints and moves its workers' jobs now (a standby's leader does at its
        next tick, from the record). Returns the workers moved."""
        await self._record_gone(instance_id, reason)
        if not self.leads():
            return []
        async with self._lock:
            workers = self._registry.by_instance(instance_id)
            for worker_id in workers:
                await self.interrupt(worker_id, reason)
            return workers

    async def _record_gone(self, instance_id: str, reason: str, ended: bool = False) -> None:
        """Durable first: a restarted control plane must refuse its retained hello too."""
        await asyncio.to_thread(self._instances.record_gone, instance_id, reason, ended)
        self._registry.instance_gone(instance_id)

    async def stop_assigning(self, instance_id: str, reason: str) -> None:
        """A rebalance recommendation (EventBridge, or a worker's IMDS): no new work there, its
        jobs run on, and the autoscaler replaces it now and terminates it once it is empty."""
        why = f"rebalance recommendation: {reason}"
        await asyncio.to_thread(
            self._store.instance_records.ask_to_drain,
            [instance_id],
            why,
            DrainKind.REBALANCE,
            ACTOR,
        )

    async def instance_gone(self, instance_id: str, reason: str) -> None:
        """Terminated: its jobs resume elsewhere (on a standby: once the leader's heartbeat
        timeout finds its workers silent)."""
        await self._record_gone(instance_id, reason, ended=True)
        if not self.leads():
            return
        async with self._lock:
            for worker_id in self._registry.by_instance(instance_id):
                self._registry.mark(worker_id, WorkerHealth.LOST, reason)
                await self.worker_gone(worker_id, reason)
