"""One tick's scheduling: read the queue (a window, every reserved job, every job whose deadline
is at risk), decide on snapshots (`orchestrator.scheduling.policy`, pure), write the
assignments, the preemption holds and the reasons jobs wait, then tell the workers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta

from kernel.clock import Clock
from kernel.errors import FrameFleetError
from kernel.job_record import JobRecord, Placement
from kernel.worker_protocol import CommandKind
from orchestrator.control.apply import assignment_move
from orchestrator.control.commands import CommandSender
from orchestrator.control.job_mover import JobMover
from orchestrator.control.scheduling_view import freeing_now, pending_jobs, running_jobs
from orchestrator.control.settings import ACTOR, ControlSettings, ControlStats, ControlStore
from orchestrator.scheduling.fit import unfit_claims
from orchestrator.scheduling.policy import schedule
from orchestrator.scheduling.registry import WorkerRegistry
from orchestrator.scheduling.snapshots import QuotaWait
from orchestrator.store.leases import Fence

# Teams' spend is read from the cost ledger at most this often: it moves by cents a minute.
SPEND_REFRESH = timedelta(minutes=1)
TeamSpend = Callable[[], Mapping[str, float]]  # USD per team since midnight UTC


class SchedulingRound:
    def __init__(
        self,
        store: ControlStore,
        registry: WorkerRegistry,
        clock: Clock,
        settings: ControlSettings,
        stats: ControlStats,
        commands: CommandSender,
        mover: JobMover,
        planned: dict[str, float],
        team_spend: TeamSpend | None = None,
    ) -> None:
        """`planned`: filled each round with the seconds per step the autoscaler planned each
        reserved job at (the stall watch's pace). `team_spend`: what each team's jobs cost
        today (for quotas with a spend per day)."""
        self._store, self._registry, self._clock = store, registry, clock
        self._settings, self._stats, self._commands = settings, stats, commands
        self._mover = mover
        self._team_spend = team_spend
        self._planned = planned
        self._spent: tuple[datetime, Mapping[str, float]] | None = None
        self._gang_holds: dict[str, str] = {}  # worker -> the spanning job it waits for

    async def _spent_today(self) -> Mapping[str, float]:
        """Only where a quota has a spend per day; refreshed each SPEND_REFRESH."""
        quotas = self._settings.scheduler.quotas.values()
        if self._team_spend is None or all(q.spend_per_day is None for q in quotas):
            return {}
        now = self._clock.now()
        if self._spent is None or now - self._spent[0] >= SPEND_REFRESH:
            self._spent = (now, await asyncio.to_thread(self._team_spend))
        return self._spent[1]

    async def run(self, placements: list[Placement]) -> None:
        now = self._clock.now()
        # The workers that take work now: a hello that arrives while this tick reads the queue
        # waits for the next one (the read was sized for these workers' free GPUs).
        accepting = self._registry.accepting()
        busy = {(p.worker_id, gpu_index) for p in placements for gpu_index in p.gpus}
        read = self._settings.queue_reads.read(self._registry.free_gpus(busy, accepting))
        queued = await asyncio.to_thread(self._store.schedulable, now, *read)
        if not queued:
            return
        reserved = await asyncio.to_thread(self._store.reservations.live)
        self._planned.clear()
        self._planned.update(
            {j: r.seconds_per_step for j, r in reserved.items() if r.seconds_per_step}
        )
        faulted = await asyncio.to_thread(self._store.faulted_on, [j.job_id for j in queued])
        holds = await asyncio.to_thread(self._store.holds.preemption_holds)
        freeing, held, freed_for = freeing_now(holds, queued, placements)
        team = self._settings.scheduler.default_team
        pending = pending_jobs(queued, reserved, self._registry, now, freed_for, faulted, team)
        running = running_jobs(placements, reserved, now, team)
        started = time.perf_counter()
        spent = await self._spent_today()
        workers = self._registry.snapshot(running, held, accepting)
        decisions = schedule(
            pending,
            workers,
            now,
            self._settings.scheduler,
            spent,
            self._gang_holds,
        )
        # Held in memory only: a replica that takes over plans its holds anew, which at worst
        # lets a one-GPU job start on a worker a spanning job was waiting for (one tick's hold).
        self._gang_holds = dict(decisions.holds)
        self._stats.schedule_seconds.append(time.perf_counter() - started)
        by_id = {job.job_id: job for job in queued}
        moves = [assignment_move(a, by_id[a.job_id]) for a in decisions.assignments]
        fence = self._mover.fence()
        outcomes = (
            await asyncio.to_thread(self._store.apply_moves, moves, ACTOR, fence) if moves else []
        )
        placed = [
            Placement(assigned, move.worker_id or "", move.gpu_index or 0, now, move.span)
            for move, assigned in zip(moves, outcomes, strict=True)
            if not isinstance(assigned, FrameFleetError)  # else moved meanwhile: next tick
        ]
        self._stats.assignments += len(placed)
        for p in placed:
            self._stats.observe_assignment((now - by_id[p.job.job_id].updated_at).total_seconds())
        placed_ids = {p.job.job_id for p in placed}
        freeing = {slot: j for slot, j in freeing.items() if j not in placed_ids}
        for preemption in decisions.preemptions:
            freeing[(preemption.worker_id, preemption.gpu_index)] = preemption.for_job_id
        if freeing != holds:  # durable before the victims are told, so a failover keeps it
            await asyncio.to_thread(self._store.holds.keep_preemption_holds, freeing, fence)
        await self._note_waits(queued, decisions.waits, fence)
        unfit = [j for j in unfit_claims(pending, workers) if j not in placed_ids]
        if unfit:  # the autoscaler buys them elsewhere, and the idle instance scales in
            await asyncio.to_thread(self._store.reservations.lapse, unfit)
        await self._commands.send_all([(p, CommandKind.ASSIGN) for p in placed], force=True)
        for preemption in decisions.preemptions:
            victim = next(p for p in placements if p.job.job_id == preemption.victim_job_id)
            await self._mover.checkpoint_now(victim, preemption.reason)

    async def _note_waits(
        self, queued: list[JobRecord], waits: Sequence[QuotaWait], fence: Fence | None
    ) -> None:
        """Each read job's reason to wait, written when it changed (a placed job has none)."""
        reasons = {wait.job_id: wait.reason for wait in waits}
        changed = {
            job.job_id: reasons.get(job.job_id)
            for job in queued
            if job.wait_reason != reasons.get(job.job_id)
        }
        await asyncio.to_thread(self._store.wait_notes.note_waits, changed, fence)
