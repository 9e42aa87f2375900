"""Whether a job fits a GPU: its memory and families, and the workers it must avoid."""

from __future__ import annotations

import math
from datetime import datetime

from kernel.gpu_fit import gpu_fits
from orchestrator.scheduling.snapshots import GpuSlot, PendingJob


def moment_seconds(moment: datetime | None) -> float:
    return math.inf if moment is None else moment.timestamp()


def fits_kind(job: PendingJob, gpu: GpuSlot) -> bool:
    return gpu_fits(gpu.family, gpu.vram_gib, job.min_vram_gib, job.families)


def fits(job: PendingJob, gpu: GpuSlot) -> bool:
    return fits_kind(job, gpu) and gpu.worker_id not in job.avoid
