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
from kernel.job_record import DrainKind, JobRecord, Placement
from kernel.job_state import JobState
from kernel.worker_protocol import CommandKind
from orchestrator.control.admission import Inbound
from orchestrator.control.commands import CommandSender
from orchestrator.control.job_events import Decision, requeue
from orchestrator.control.leadership import Leadership
from orchestrator.control.settings import ACTOR, ControlStore, InstanceBook
from orchestrator.scheduling.registry import WorkerRegistry
from orchestrator.scheduling.worker_health import WorkerHealth

# How far back gone instances are loaded at start (what a retained hello can be older than).
GONE_MEMORY = timedelta(days=30)


class InstanceEvents:
    """Mixed into ControlPlaneService, which provides these."""

    _store: ControlStore
    _clock: Clock
    _instances: InstanceBook
    _lock: asyncio.Lock
    _leadership: Leadership | None
    registry: WorkerRegistry

    _commands: CommandSender

    async def _commit(self, decided: list[tuple[JobRecord, Decision, Inbound | None]]) -> None:
        raise NotImplementedError

    async def _checkpoint_now(self, placement: Placement, reason: str) -> None:
        raise NotImplementedError

    async def remember_gone_instances(self) -> None:
        """Gone instances' retained hellos are refused."""
        since = self._clock.now() - GONE_MEMORY
        for instance_id in await asyncio.to_thread(self._instances.gone_since, since):
            self.registry.instance_gone(instance_id)

    async def _interrupt(self, worker_id: str, reason: str) -> None:
        """A spot notice: no new work there; its jobs checkpoint now and move when durable."""
        self.registry.mark(worker_id, WorkerHealth.INTERRUPTED, reason)
        await self._move_jobs_off(worker_id, reason)

    async def _move_jobs_off(self, worker_id: str, reason: str) -> None:
        for placement in await asyncio.to_thread(self._store.placements):
            if placement.worker_id != worker_id:
                continue
            if placement.job.state is JobState.RUNNING:
                await self._checkpoint_now(placement, reason)
            elif placement.job.state is JobState.ASSIGNED:
                # Its `started` may still be on the way. A worker that runs it checkpoints and
                # reports `preempted`; one that never started it refuses the assignment; both
                # send the job back to the queue.
                await self._commands.send(placement, CommandKind.CHECKPOINT_NOW, force=True)

    async def _worker_gone(self, worker_id: str, reason: str) -> None:
        """Lost without (further) notice: its jobs resume elsewhere from their checkpoint."""
        await self._commit(
            [
                (p.job, requeue(p.job, f"{reason} ({worker_id})"), None)
                for p in await asyncio.to_thread(self._store.placements)
                if p.worker_id == worker_id
            ]
        )

    def leads(self) -> bool:
        return self._leadership is None or self._leadership.leading()

    async def interrupt_instance(self, instance_id: str, reason: str) -> list[str]:
        """A spot warning: the instance's record says so at once, on any replica (its GPUs are
        no capacity for the autoscaler, which buys the replacement in its next round); the
        leader checkpoints and moves its workers' jobs now (a standby's leader does at its
        next tick, from the record). Returns the workers moved."""
        await self._record_gone(instance_id, reason)
        if not self.leads():
            return []
        async with self._lock:
            workers = self.registry.by_instance(instance_id)
            for worker_id in workers:
                await self._interrupt(worker_id, reason)
            return workers

    async def _record_gone(self, instance_id: str, reason: str, ended: bool = False) -> None:
        """Durable first: a restarted control plane must refuse its retained hello too."""
        await asyncio.to_thread(self._instances.record_gone, instance_id, reason, ended)
        self.registry.instance_gone(instance_id)

    async def stop_assigning(self, instance_id: str, reason: str) -> None:
        """A rebalance recommendation (EventBridge, or a worker's IMDS): no new work there, its
        jobs run on, and the autoscaler replaces it now and terminates it once it is empty."""
        why = f"rebalance recommendation: {reason}"
        await asyncio.to_thread(
            self._store.ask_to_drain, [instance_id], why, DrainKind.REBALANCE, ACTOR
        )

    async def instance_gone(self, instance_id: str, reason: str) -> None:
        """Terminated: its jobs resume elsewhere (on a standby: once the leader's heartbeat
        timeout finds its workers silent)."""
        await self._record_gone(instance_id, reason, ended=True)
        if not self.leads():
            return
        async with self._lock:
            for worker_id in self.registry.by_instance(instance_id):
                self.registry.mark(worker_id, WorkerHealth.LOST, reason)
                await self._worker_gone(worker_id, reason)
