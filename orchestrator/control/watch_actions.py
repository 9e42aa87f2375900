"""What the control plane does with the GPU watch's findings:
a stalled job goes back to the queue at once (it resumes from its last checkpoint, and the
worker it stalled on is avoided) and is cancelled on its worker, which kills its render; a
quarantined GPU gets no more work, its jobs checkpoint and move, its instance is drained and
replaced (a rebalance drain: the autoscaler buys its replacement now), and an alert fires
(`framefleet_gpu_quarantines_total`, FrameFleetGpuQuarantined)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from kernel.fleet_facts import GpuFault, GpuFaultKind
from kernel.job_record import DrainKind, JobChanges, Placement
from kernel.job_state import JobState
from kernel.worker_protocol import CommandKind, WorkerEvent
from orchestrator.control.commands import CommandSender
from orchestrator.control.gpu_watch import GpuWatch, Quarantine
from orchestrator.control.job_events import Move
from orchestrator.control.job_mover import JobMover
from orchestrator.control.settings import ACTOR, ControlStats, ControlStore
from orchestrator.scheduling.registry import WorkerRegistry

log = logging.getLogger(__name__)


class WatchActions:
    def __init__(
        self,
        store: ControlStore,
        registry: WorkerRegistry,
        watch: GpuWatch,
        planned: Mapping[str, float],
        stats: ControlStats,
        commands: CommandSender,
        mover: JobMover,
    ) -> None:
        self._store = store
        self._registry = registry
        self._watch = watch
        # job -> the seconds per step the autoscaler planned with (the scheduling round's)
        self._planned = planned
        self._stats = stats
        self._commands = commands
        self._mover = mover

    async def step(self, placements: list[Placement]) -> None:
        findings = await self._watch.look(placements, self._planned)
        for placement, why in findings.stalled:
            self._stats.on_gpu_fault(GpuFaultKind.STALL.value)
            move = Move(
                (JobState.PREEMPTED, JobState.QUEUED),
                f"stalled: {why}",
                JobChanges(worker_fault=True),
            )
            await self._mover.commit([(placement.job, move, None)])
            await self._commands.send(placement, CommandKind.CANCEL, force=True)
        await self._quarantine(findings.quarantined, placements)

    async def stalled_on_worker(self, event: WorkerEvent) -> None:
        """A worker's own watchdog killed a job: the stall is its GPU's."""
        hello = self._registry.hello(event.worker_id)
        if hello is None or event.gpu_index is None:
            return
        self._stats.on_gpu_fault(GpuFaultKind.STALL.value)
        fault = GpuFault(
            event.worker_id,
            hello.instance,
            event.gpu_index,
            GpuFaultKind.STALL,
            f"{event.job_id}: {event.error}",
            event.sent_at,
            event.job_id,
        )
        quarantined = await self._watch.record(fault)
        if quarantined:
            placements = await asyncio.to_thread(self._store.placements)
            await self._quarantine(quarantined, placements)

    async def _quarantine(self, found: list[Quarantine], placements: list[Placement]) -> None:
        for q in found:
            self._stats.on_gpu_fault(GpuFaultKind.QUARANTINE.value)
            why = f"GPU {q.gpu_index} of {q.worker_id} quarantined: {q.reason}"
            log.warning("ALERT %s; its jobs move and instance %s is replaced", why, q.instance_id)
            await self._mover.move_off(placements, q.holds, why)
            await asyncio.to_thread(
                self._store.instance_records.ask_to_drain,
                [q.instance_id],
                why,
                DrainKind.REBALANCE,
                ACTOR,
            )
