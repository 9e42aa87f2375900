"""Slots that take turns on one GPU (a worker's `jobs_per_gpu`): memory is each slot's own (its
render process is capped at the slot's part), time is not: a job beside others on a GPU steps
slower. The scheduler gives a job such a slot beside running neighbours only where no deadline
is involved, neither the job's nor a neighbour's: it does not stake a deadline on the sharing
pace (`gpu_sharing.SharingPace`, which the fleet simulator plans with) until GPU runs have
measured it. Jobs without deadlines fill the turns; a GPU whose slots are all free takes any.
"""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.scheduling.snapshots import GpuSlot, PendingJob, RunningJob, WorkerSnapshot

Gpu = tuple[str, int]  # (worker, physical GPU)


class Turns:
    """Who takes turns on each shared GPU this tick (the running, and the jobs placed so far)."""

    def __init__(self, workers: Sequence[WorkerSnapshot]) -> None:
        # Per shared GPU: how many jobs are on it, and how many of them have a deadline.
        self._tenants: dict[Gpu, int] = {}
        self._deadlines: dict[Gpu, int] = {}
        for worker in workers:
            for slot in worker.gpus:
                if slot.running is not None:
                    self._add(slot, slot.running.deadline is not None)

    def admits(self, job: PendingJob, slot: GpuSlot) -> bool:
        """May `job` take this free slot beside the GPU's running jobs?"""
        return self._admits(job, slot, leaving=None)

    def admits_instead(self, job: PendingJob, slot: GpuSlot) -> bool:
        """May `job` take the slot of the job running there (a preemption), beside the rest?"""
        return self._admits(job, slot, leaving=slot.running)

    def took(self, job: PendingJob, slot: GpuSlot) -> None:
        self._add(slot, job.deadline is not None)

    def _admits(self, job: PendingJob, slot: GpuSlot, leaving: RunningJob | None) -> bool:
        gpu = _gpu_of(slot)
        if gpu is None:
            return True
        others = self._tenants.get(gpu, 0) - (leaving is not None)
        due = self._deadlines.get(gpu, 0) - (leaving is not None and leaving.deadline is not None)
        return others <= 0 or (job.deadline is None and due <= 0)

    def _add(self, slot: GpuSlot, deadline: bool) -> None:
        gpu = _gpu_of(slot)
        if gpu is not None:
            self._tenants[gpu] = self._tenants.get(gpu, 0) + 1
            self._deadlines[gpu] = self._deadlines.get(gpu, 0) + deadline


def _gpu_of(slot: GpuSlot) -> Gpu | None:
    if not slot.time_shared or slot.physical is None:
        return None
    return (slot.worker_id, slot.physical)
