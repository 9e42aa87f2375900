"""Slots that take turns on one GPU (a worker's `jobs_per_gpu`): memory is each slot's own (its
render process is capped at the slot's part), time is not: a job beside others on a GPU steps
slower. The scheduler gives a job such a slot beside running neighbours only where no deadline
is involved, neither the job's nor a neighbour's: it does not stake a deadline on the sharing
pace (`gpu_sharing.SharingPace`, which the fleet simulator plans with) until GPU runs have
measured it. Jobs without deadlines fill the turns; a GPU whose slots are all free takes any.
"""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.scheduling.snapshots import GpuSlot, PendingJob, WorkerSnapshot

Gpu = tuple[str, int]  # (worker, physical GPU)


class Turns:
    """Who takes turns on each shared GPU this tick (the running, and the jobs placed so far)."""

    def __init__(self, workers: Sequence[WorkerSnapshot]) -> None:
        # Per shared GPU: whether anyone on it has a deadline, and how many are on it.
        self._deadlines: dict[Gpu, bool] = {}
        self._tenants: dict[Gpu, int] = {}
        for worker in workers:
            for slot in worker.gpus:
                if slot.running is not None:
                    self._add(slot, slot.running.deadline is not None)

    def admits(self, job: PendingJob, slot: GpuSlot) -> bool:
        gpu = _gpu_of(slot)
        if gpu is None or not self._tenants.get(gpu):
            return True
        return job.deadline is None and not self._deadlines.get(gpu, False)

    def took(self, job: PendingJob, slot: GpuSlot) -> None:
        self._add(slot, job.deadline is not None)

    def _add(self, slot: GpuSlot, deadline: bool) -> None:
        gpu = _gpu_of(slot)
        if gpu is not None:
            self._tenants[gpu] = self._tenants.get(gpu, 0) + 1
            self._deadlines[gpu] = self._deadlines.get(gpu, False) or deadline


def _gpu_of(slot: GpuSlot) -> Gpu | None:
    if not slot.time_shared or slot.physical is None:
        return None
    return (slot.worker_id, slot.physical)
