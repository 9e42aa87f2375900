"""The scheduler's pass for jobs that span several GPUs (`gpu.count` > 1), before the one-GPU
jobs: the gang rule (`gangs.plan_gangs`) over the workers' GPUs, as assignments of a lead GPU
and the rest of the span, and the workers it holds, which no one-GPU job may take this tick.

Workers the autoscaler bought for a one-GPU job stay that job's (the gang rule does not see
them); a gang's own reserved workers it sees like any other. A team's quota admits a gang only
if it admits every GPU of it. Gangs never preempt: they hold a worker until it empties.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from orchestrator.scheduling.gangs import GangGpu, GangJob, GangWorker, plan_gangs
from orchestrator.scheduling.quotas import ShareBook
from orchestrator.scheduling.snapshots import Assignment, PendingJob, WorkerSnapshot

# A busy GPU's expected end, where the snapshot has none: the gang rule only compares them.
BUSY_FOR = timedelta(hours=1)


@dataclass(frozen=True)
class GangRound:
    assignments: tuple[Assignment, ...] = ()
    holds: Mapping[str, str] = field(default_factory=dict)  # worker -> the gang it waits for
    taken: frozenset[tuple[str, int]] = frozenset()  # (worker, GPU) the gangs took
    waits: Mapping[str, str] = field(default_factory=dict)  # job -> why it waits


def _worker(worker: WorkerSnapshot, now: datetime) -> GangWorker:
    """The worker's whole GPUs: a MIG slot or a turn on a shared GPU is no GPU to span (NCCL
    does not span MIG instances, and two turns on one GPU are one GPU's compute)."""
    gpus = tuple(
        GangGpu(
            gpu.index,
            gpu.family,
            gpu.vram_gib,
            None if gpu.running is None and gpu.reserved_for is None else now + BUSY_FOR,
        )
        for gpu in worker.gpus
        if gpu.physical is None
    )
    return GangWorker(worker.worker_id, gpus)


def place_gangs(
    gangs: Sequence[PendingJob],
    workers: Sequence[WorkerSnapshot],
    reserved_for_others: frozenset[str],
    now: datetime,
    held_before: Mapping[str, str],
    shares: ShareBook | None,
) -> GangRound:
    """`gangs` in queue order; `reserved_for_others`: workers bought for one-GPU jobs;
    `shares`: the teams' quotas, charged for every GPU a gang takes."""
    if not gangs:
        return GangRound()
    seen = [w for w in workers if w.accepting and w.worker_id not in reserved_for_others]
    slots = {(w.worker_id, g.index): g for w in seen for g in w.gpus}
    plan = plan_gangs(
        [GangJob(j.job_id, j.gpus, j.min_vram_gib, j.families) for j in gangs],
        [_worker(w, now) for w in seen],
        now,
        held_before,
    )
    by_id = {job.job_id: job for job in gangs}
    assignments: list[Assignment] = []
    taken: set[tuple[str, int]] = set()
    waits = dict(plan.waits)
    for job_id, (worker_id, indexes) in plan.starts.items():
        job, gpus = by_id[job_id], [slots[(worker_id, i)] for i in indexes]
        if any(gpu.worker_id in job.avoid for gpu in gpus):
            waits[job_id] = f"an earlier attempt failed on {worker_id} through its fault"
            continue
        family = gpus[0].family  # an instance's GPUs are all of one family
        if shares is not None:
            if not shares.admits_several(job.team, family, len(gpus)):
                waits[job_id] = f"its team's quota does not admit {len(gpus)} {family} GPUs"
                continue
            for _ in gpus:
                shares.take(job.team, family)
        taken.update((worker_id, i) for i in indexes)
        reason = f"spans {len(indexes)} {family} GPUs of {worker_id}, all free together"
        assignments.append(Assignment(job_id, worker_id, indexes[0], reason, indexes[1:]))
    return GangRound(tuple(assignments), dict(plan.holds), frozenset(taken), waits)
