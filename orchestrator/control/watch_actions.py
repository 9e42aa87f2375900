"""What the control plane does with the GPU watch's findings (mixed into ControlPlaneService):
a stalled job goes back to the queue at once (it resumes from its last checkpoint, and the
worker it stalled on is avoided) and is cancelled on its worker, which kills its render; a
quarantined GPU gets no more work, its jobs checkpoint and move, its instance is drained and
replaced (a rebalance drain: the autoscaler buys its replacement now), and an alert fires
(`framefleet_gpu_quarantines_total`, FrameFleetGpuQuarantined)."""

from __future__ import annotations

import asyncio
import logging

from kernel.fleet_facts import GpuFault, GpuFaultKind
from kernel.job_record import DrainKind, JobChanges, JobRecord, Placement
from kernel.job_state import JobState
from kernel.worker_protocol import CommandKind, WorkerEvent
from orchestrator.control.admission import Inbound
from orchestrator.control.commands import CommandSender
from orchestrator.control.gpu_watch import GpuWatch, Quarantine
from orchestrator.control.job_events import Decision, Move
from orchestrator.control.scheduling_round import SchedulingRound
from orchestrator.control.settings import ACTOR, ControlStats, ControlStore
from orchestrator.scheduling.registry import WorkerRegistry

log = logging.getLogger(__name__)


class WatchActions:
    """Mixed into ControlPlaneService, which provides these."""

    _store: ControlStore
    _commands: CommandSender
    registry: WorkerRegistry
    watch: GpuWatch
    # job -> the seconds per step the autoscaler planned with (its reservation)
    _scheduling: SchedulingRound
    stats: ControlStats

    async def _commit(self, decided: list[tuple[JobRecord, Decision, Inbound | None]]) -> None:
        raise NotImplementedError

    async def _checkpoint_now(self, placement: Placement, reason: str) -> None:
        raise NotImplementedError

    def expected_step(self, placement: Placement) -> float | None:
        family = self.registry.family_of(placement.worker_id, placement.gpu_index)
        job = placement.job
        return self.watch.expected_step(job, family, self._scheduling.planned.get(job.job_id))

    async def _watch(self, placements: list[Placement]) -> None:
        findings = await self.watch.look(placements, self._scheduling.planned)
        for placement, why in findings.stalled:
            self.stats.on_gpu_fault(GpuFaultKind.STALL.value)
            move = Move(
                (JobState.PREEMPTED, JobState.QUEUED),
                f"stalled: {why}",
                JobChanges(worker_fault=True),
            )
            await self._commit([(placement.job, move, None)])
            await self._commands.send(placement, CommandKind.CANCEL, force=True)
        await self._quarantine(findings.quarantined, placements)

    async def _stalled_on_worker(self, event: WorkerEvent) -> None:
        """A worker's own watchdog killed a job: the stall is its GPU's."""
        hello = self.registry.hello(event.worker_id)
        if hello is None or event.gpu_index is None:
            return
        self.stats.on_gpu_fault(GpuFaultKind.STALL.value)
        fault = GpuFault(
            event.worker_id,
            hello.instance,
            event.gpu_index,
            GpuFaultKind.STALL,
            f"{event.job_id}: {event.error}",
            event.sent_at,
            event.job_id,
        )
        quarantined = await self.watch.record(fault)
        if quarantined:
            placements = await asyncio.to_thread(self._store.placements)
            await self._quarantine(quarantined, placements)

    async def _quarantine(self, found: list[Quarantine], placements: list[Placement]) -> None:
        for q in found:
            self.stats.on_gpu_fault(GpuFaultKind.QUARANTINE.value)
            why = f"GPU {q.gpu_index} of {q.worker_id} quarantined: {q.reason}"
            log.warning("ALERT %s; its jobs move and instance %s is replaced", why, q.instance_id)
            for p in placements:
                if (p.worker_id, p.gpu_index) == (q.worker_id, q.gpu_index):
                    if p.job.state is JobState.RUNNING:
                        await self._checkpoint_now(p, why)
                    elif p.job.state is JobState.ASSIGNED:
                        await self._commands.send(p, CommandKind.CHECKPOINT_NOW, force=True)
            await asyncio.to_thread(
                self._store.ask_to_drain, [q.instance_id], why, DrainKind.REBALANCE, ACTOR
            )
