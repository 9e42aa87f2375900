"""The scheduler: jobs in the queue's order (`queue_rank`: priority aged by the wait, a job
at risk never passed for age alone, then least slack, then arrival); GPU fit by
VRAM and family; among GPUs equally good for a job (the same size and market), one that holds
its model loaded (cache-aware placement: it costs no priority or deadline, and saves the
load); one job per GPU; a much more urgent job may preempt a less urgent one when nothing fits,
but never one due before it, nor for a job whose
own instance is on its way. The GPU the autoscaler bought for a job goes to that job first.

Pure: the same snapshots and `now` always give the same decisions.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime

from orchestrator.scheduling.fit import fits, fits_kind
from orchestrator.scheduling.gang_round import place_gangs
from orchestrator.scheduling.queue_rank import effective_priority, queue_keys
from orchestrator.scheduling.quotas import ShareBook
from orchestrator.scheduling.snapshots import (
    Assignment,
    Decisions,
    GpuSlot,
    PendingJob,
    Preemption,
    QuotaWait,
    SchedulerSettings,
    WorkerSnapshot,
)
from orchestrator.scheduling.turns import Turns
from orchestrator.scheduling.victims import Victims

Admits = Callable[[GpuSlot], bool]  # may the job's team take this GPU (its quota)?


def _anywhere(_gpu: GpuSlot) -> bool:
    return True


class _FreeGpus:
    """Free GPUs grouped by (family, VRAM, market), each group in (worker, index) order:
    picking the best fit costs a pass over the few kinds of GPU, not over a thousand workers."""

    def __init__(self, gpus: Iterable[GpuSlot]) -> None:
        self._kinds: dict[tuple[str, float, bool], list[GpuSlot]] = {}
        # Free GPUs holding each model: a job looks for a warm one only when there is some.
        self._warm: dict[str, int] = {}
        for gpu in sorted(gpus, key=lambda g: (g.worker_id, g.index), reverse=True):
            self._kinds.setdefault((gpu.family, gpu.vram_gib, gpu.spot), []).append(gpu)
            if gpu.warm_model:
                self._warm[gpu.warm_model] = self._warm.get(gpu.warm_model, 0) + 1

    def __bool__(self) -> bool:
        return any(self._kinds.values())

    def take_reserved(self, job: PendingJob, admits: Admits = _anywhere) -> GpuSlot | None:
        """A free GPU that fits on one of the workers reserved for the job."""
        for kind in self._kinds.values():
            for position, gpu in enumerate(kind):
                if gpu.worker_id in job.reserved_on and fits(job, gpu) and admits(gpu):
                    return kind.pop(position)
        return None

    def fits_any(self, job: PendingJob, now: datetime, admits: Admits) -> bool:
        return bool(self._candidates(job, now, admits))

    def _candidates(
        self, job: PendingJob, now: datetime, admits: Admits
    ) -> list[tuple[GpuSlot, int]]:
        spot_ok = not job.on_demand_only and (job.spot_until is None or now <= job.spot_until)
        warm_wanted = self._warm.get(job.model, 0) > 0
        return [
            (gpu, position)
            for kind in self._kinds.values()
            if (found := _first_usable(kind, job, warm_wanted)) is not None
            for gpu, position in (found,)
            if (spot_ok or not gpu.spot) and admits(gpu)
        ]

    def take_best_fit(
        self, job: PendingJob, now: datetime, admits: Admits = _anywhere
    ) -> GpuSlot | None:
        # The smallest GPU that fits keeps the large ones for the jobs that need them. Among
        # equals, a job with a deadline takes on-demand capacity (the autoscaler may have
        # bought it for exactly that), and one without takes spot.
        candidates = self._candidates(job, now, admits)
        if not candidates:
            return None
        wants_spot = job.deadline is None
        best, position = min(
            candidates,
            key=lambda c: (
                c[0].vram_gib,
                c[0].spot is not wants_spot,
                c[0].warm_model != job.model,
                c[0].worker_id,
                c[0].index,
            ),
        )
        self._kinds[(best.family, best.vram_gib, best.spot)].pop(position)
        if best.warm_model:
            self._warm[best.warm_model] -= 1
        return best


def _first_usable(
    kind: list[GpuSlot], job: PendingJob, warm_wanted: bool = False
) -> tuple[GpuSlot, int] | None:
    """The group's next GPU for the job: its first, unless the job must avoid that worker
    (an earlier attempt failed there through the worker's fault), then the next one; with
    `warm_wanted`, the first that holds the job's model if the group has one."""
    if not kind or not fits_kind(job, kind[-1]):
        return None  # the group's kind does not fit (every GPU in it is the same kind)
    first: tuple[GpuSlot, int] | None = None
    for position in range(len(kind) - 1, -1, -1):
        gpu = kind[position]
        if gpu.worker_id in job.avoid:
            continue
        if not warm_wanted or gpu.warm_model == job.model:
            return gpu, position
        first = first or (gpu, position)
    return first


def _assignment(
    job: PendingJob, gpu: GpuSlot, now: datetime, settings: SchedulerSettings, why: str = ""
) -> Assignment:
    return Assignment(
        job.job_id,
        gpu.worker_id,
        gpu.index,
        f"priority {effective_priority(job, now, settings):.2f}, {why}fits "
        f"{gpu.family} {gpu.vram_gib:.4g} GiB on {gpu.worker_id}",
    )


def schedule(
    pending: Sequence[PendingJob],
    workers: Sequence[WorkerSnapshot],
    now: datetime,
    settings: SchedulerSettings | None = None,
    spent_today: Mapping[str, float] | None = None,
    held_before: Mapping[str, str] | None = None,
) -> Decisions:
    """`spent_today`: USD per team today, for the teams' spend per day (`quotas`);
    `held_before`: the workers the last tick held for spanning jobs (`Decisions.holds`)."""
    settings = settings or SchedulerSettings()
    # Teams' shares (none configured: nobody is limited, and nothing below changes).
    running = [(g.running.team, g.family) for w in workers for g in w.gpus if g.running]
    shares = ShareBook(settings.quotas, running, spent_today) if settings.quotas else None

    turns = Turns(workers, now)
    # One order for the whole snapshot: a job at risk ranks against every queued job.
    key = queue_keys(pending, now, settings)

    def admits(job: PendingJob, borrow: bool = True) -> Admits:
        if shares is None or job.team is None:
            return lambda gpu: turns.admits(job, gpu)
        return lambda gpu: turns.admits(job, gpu) and shares.admits(job.team, gpu.family, borrow)

    # Jobs that span GPUs go first, as gangs; what they take or hold, no one-GPU job gets.
    gangs = place_gangs(
        sorted((j for j in pending if j.gpus > 1), key=key),
        workers,
        frozenset(w for j in pending if j.gpus == 1 for w in j.reserved_on),
        now,
        held_before or {},
        shares,
    )
    pending = [j for j in pending if j.gpus == 1]
    usable = [
        gpu
        for worker in workers
        if worker.accepting and worker.worker_id not in gangs.holds
        for gpu in worker.gpus
        if (gpu.worker_id, gpu.index) not in gangs.taken
    ]
    free = _FreeGpus(gpu for gpu in usable if gpu.running is None and gpu.reserved_for is None)
    already_reserved = {gpu.reserved_for for gpu in usable if gpu.reserved_for}
    victims = Victims(
        (g for g in usable if g.running is not None and g.reserved_for is None), turns
    )
    weakest = victims.weakest()
    assignments: list[Assignment] = []
    preemptions: list[Preemption] = []

    def assign(job: PendingJob, gpu: GpuSlot, why: str = "") -> None:
        turns.took(job, gpu)
        if shares is not None:
            shares.take(job.team, gpu.family)
        assignments.append(_assignment(job, gpu, now, settings, why))

    # First the capacity the autoscaler bought for a job goes to that job, so another job
    # cannot take the on-demand GPU a deadline needed and leave it to wait for the next one.
    on_reserved: set[str] = set()
    for job in sorted((j for j in pending if j.reserved_on), key=key):
        if job.job_id in already_reserved:
            continue
        gpu = free.take_reserved(job, admits(job))
        if gpu is not None:
            on_reserved.add(job.job_id)
            assign(job, gpu, "reserved for it, ")

    def may_preempt(job: PendingJob) -> bool:
        # Not when its own GPU is minutes away, nor when nothing running is enough less urgent
        # to give way: a preemption would cost the victim a whole start-up for little gain.
        return not job.capacity_coming and job.priority >= weakest + settings.preemption_margin

    def may_reclaim(job: PendingJob) -> bool:
        return shares is not None and shares.may_reclaim_any(job.team, job.families)

    def without_gpu(job: PendingJob) -> None:
        """No free GPU it may take: take back its team's share, else preempt by priority."""
        reclaimed = shares is not None and may_reclaim(job) and victims.reclaim_for(job, shares)
        if reclaimed:
            preemptions.append(reclaimed)
        elif may_preempt(job) and (preemption := victims.preempt_for(job, settings, shares)):
            preemptions.append(preemption)

    # The queue as a heap, taken in order while GPUs are free: a tick that fills a few GPUs
    # from a long queue does not sort all of it. Left out: the jobs whose GPU is being freed
    # for them, and those that have their reserved one.
    queue = [j for j in pending if j.job_id not in already_reserved and j.job_id not in on_reserved]
    heap = [(key(job), position) for position, job in enumerate(queue)]
    heapq.heapify(heap)
    # Within their teams' shares first; a job that could only borrow waits for the end of the
    # round, so a team's idle share goes to that team's own jobs before anyone borrows it.
    borrowers: list[PendingJob] = []
    while heap and free:
        job = queue[heapq.heappop(heap)[1]]
        gpu = free.take_best_fit(job, now, admits(job, borrow=False))
        if gpu is not None:
            assign(job, gpu)
        elif shares is not None and free.fits_any(job, now, admits(job)):
            borrowers.append(job)
        else:
            without_gpu(job)
    for job in borrowers:
        gpu = free.take_best_fit(job, now, admits(job))
        if gpu is not None:
            assign(job, gpu, "borrowing an idle share, ")
        else:
            without_gpu(job)
    # No GPU is free any more: the rest of the queue may only preempt, in queue order.
    for _, position in sorted(
        entry for entry in heap if may_preempt(queue[entry[1]]) or may_reclaim(queue[entry[1]])
    ):
        without_gpu(queue[position])
    placed = {a.job_id for a in assignments} | {p.for_job_id for p in preemptions}
    waits = () if shares is None else _quota_waits(queue, placed, shares)
    gang_waits = tuple(QuotaWait(job_id, why) for job_id, why in gangs.waits.items())
    return Decisions(
        (*gangs.assignments, *assignments), tuple(preemptions), waits + gang_waits, gangs.holds
    )


def _quota_waits(
    queue: Sequence[PendingJob], placed: set[str], shares: ShareBook
) -> tuple[QuotaWait, ...]:
    """The jobs left waiting whose team's quota admits them to no GPU they may use."""
    return tuple(
        QuotaWait(job.job_id, shares.why_waits(job.team, job.families))
        for job in queue
        if job.team is not None
        and job.job_id not in placed
        and shares.blocked(job.team, job.families)
    )
