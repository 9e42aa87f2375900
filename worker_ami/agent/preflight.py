"""Checks before taking work (pure over what was measured): a failed preflight refuses the job
with every reason at once."""

from __future__ import annotations

from dataclasses import dataclass

from kernel.job_spec import JobSpec
from kernel.render_stage import RenderStage, stage_need_gib
from worker_ami.agent.telemetry import GpuTelemetry, NvmlUnavailable

GIB = 1024**3


@dataclass(frozen=True)
class PreflightFacts:
    gpus: list[GpuTelemetry] | NvmlUnavailable
    allow_cpu: bool
    free_disk_bytes: int
    min_free_disk_bytes: int
    model_error: str | None  # None when the model loaded
    smoke_error: str | None  # None when the one-step smoke run passed


def preflight_problems(
    spec: JobSpec, facts: PreflightFacts, stage: RenderStage | None = None
) -> tuple[str, ...]:
    """`stage`: the stage of a split render the job runs here, whose own need counts."""
    problems: list[str] = []
    if isinstance(facts.gpus, NvmlUnavailable) or not facts.gpus:
        if not facts.allow_cpu:
            why = facts.gpus.reason if isinstance(facts.gpus, NvmlUnavailable) else "no GPU found"
            problems.append(f"no GPU ({why}) and CPU mode is not allowed")
    else:
        best = max(gpu.memory_free_bytes for gpu in facts.gpus)
        # Its model's need (its stage's), or the producer's where that is more.
        need = stage_need_gib(spec, stage)
        if best < need * GIB:
            problems.append(f"free VRAM {best / GIB:.1f} GiB < job needs {need:.1f} GiB")
        faulty = [g.index for g in facts.gpus if (g.ecc_uncorrected_errors or 0) > 0]
        if faulty:
            problems.append(f"uncorrected ECC errors on GPU {faulty}")
    if facts.free_disk_bytes < facts.min_free_disk_bytes:
        problems.append(
            f"free disk {facts.free_disk_bytes / GIB:.1f} GiB < "
            f"{facts.min_free_disk_bytes / GIB:.1f} GiB required"
        )
    if facts.model_error:
        problems.append(f"model does not load: {facts.model_error}")
    if facts.smoke_error:
        problems.append(f"one-step smoke run failed: {facts.smoke_error}")
    return tuple(problems)
