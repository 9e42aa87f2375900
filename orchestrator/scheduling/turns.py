"""Slots that take turns on one GPU (a worker's `jobs_per_gpu`): memory is each slot's own (its
render process is capped at the slot's part), time is not: a job beside others on a GPU steps
slower. A job takes such a slot beside running neighbours only if every job on the GPU, itself
included, still meets its deadline at the shared pace (`gpu_sharing.why_not_join`, each job's
step at the step-time model's pace on the GPU's family, with the steps it has left since its
last checkpoint). Where a job with a deadline has no known work, none is staked: it neither
joins nor is joined. A GPU whose slots are all free takes any job.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from kernel.step_time import architecture_of, step_seconds, tokens
from orchestrator.scheduling.gpu_sharing import SharedGpu, Tenant, why_not_join
from orchestrator.scheduling.snapshots import (
    GpuSlot,
    PendingJob,
    RunningJob,
    Work,
    WorkerSnapshot,
)

Gpu = tuple[str, int]  # (worker, physical GPU)


@dataclass(frozen=True)
class _OnGpu:
    job_id: str
    deadline: datetime | None
    work: Work | None


class Turns:
    """Who takes turns on each shared GPU this tick (the running, and the jobs placed so far)."""

    def __init__(self, workers: Sequence[WorkerSnapshot], now: datetime) -> None:
        self._now = now
        self._on: dict[Gpu, list[_OnGpu]] = {}
        for worker in workers:
            for slot in worker.gpus:
                if slot.running is not None:
                    self._add(slot, _of(slot.running))

    def admits(self, job: PendingJob, slot: GpuSlot) -> bool:
        """May `job` take this free slot beside the GPU's running jobs?"""
        return self._admits(job, slot, leaving=None)

    def admits_instead(self, job: PendingJob, slot: GpuSlot) -> bool:
        """May `job` take the slot of the job running there (a preemption), beside the rest?"""
        running = slot.running
        return self._admits(job, slot, leaving=None if running is None else running.job_id)

    def took(self, job: PendingJob, slot: GpuSlot) -> None:
        self._add(slot, _OnGpu(job.job_id, job.deadline, job.work))

    def _admits(self, job: PendingJob, slot: GpuSlot, leaving: str | None) -> bool:
        gpu = _gpu_of(slot)
        if gpu is None:
            return True
        others = [o for o in self._on.get(gpu, []) if o.job_id != leaving]
        if not others:
            return True
        joining = _OnGpu(job.job_id, job.deadline, job.work)
        together = [*others, joining]
        if all(o.deadline is None for o in together):
            return True
        if any(o.work is None for o in together):
            return False  # a deadline is involved and some pace is unknown: stake nothing
        tenants = tuple(_tenant(o, slot.family) for o in others)
        shared = SharedGpu(slot.worker_id, gpu[1], float("inf"), tenants)
        return why_not_join(shared, _tenant(joining, slot.family), self._now) is None

    def _add(self, slot: GpuSlot, on: _OnGpu) -> None:
        gpu = _gpu_of(slot)
        if gpu is not None:
            self._on.setdefault(gpu, []).append(on)


def _of(running: RunningJob) -> _OnGpu:
    return _OnGpu(running.job_id, running.deadline, running.work)


def _tenant(on: _OnGpu, family: str) -> Tenant:
    work = on.work
    assert work is not None  # checked by the caller
    arch = architecture_of(work.model)
    pace = step_seconds(arch, work.width, work.height, work.frames, family)
    video_tokens = tokens(work.width, work.height, work.frames, arch)
    return Tenant(on.job_id, 0.0, pace, max(1, work.steps_left), on.deadline, video_tokens)


def _gpu_of(slot: GpuSlot) -> Gpu | None:
    if not slot.time_shared or slot.physical is None:
        return None
    return (slot.worker_id, slot.physical)
