"""Whether a job fits a GPU: its memory and families, and the workers it must avoid."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime

from kernel.gpu_fit import gpu_fits
from orchestrator.scheduling.snapshots import GpuSlot, PendingJob, WorkerSnapshot


def moment_seconds(moment: datetime | None) -> float:
    return math.inf if moment is None else moment.timestamp()


def fits_kind(job: PendingJob, gpu: GpuSlot) -> bool:
    return gpu_fits(gpu.family, gpu.vram_gib, job.min_vram_gib, job.families)


def fits(job: PendingJob, gpu: GpuSlot) -> bool:
    return fits_kind(job, gpu) and gpu.worker_id not in job.avoid


def unfit_claims(pending: Sequence[PendingJob], workers: Sequence[WorkerSnapshot]) -> list[str]:
    """The jobs whose claimed instance is up and offers no slots that fit them, however freed
    (memory, family, its avoid list, enough of them for a span): the autoscaler's claim will
    never be used there, so it should lapse now rather than keep an idle instance billed."""
    by_id = {worker.worker_id: worker for worker in workers if worker.accepting}
    unfit = []
    for job in pending:
        claimed = [by_id[w] for w in sorted(job.reserved_on) if w in by_id]
        if claimed and all(sum(fits(job, gpu) for gpu in w.gpus) < job.gpus for w in claimed):
            unfit.append(job.job_id)
    return unfit
