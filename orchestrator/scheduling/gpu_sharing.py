"""Whether a job may join a GPU that other jobs already render on, and which such GPU suits it:
a pure rule over a snapshot of the GPU's tenants.

Two things decide. Memory: each job runs in a process of its own capped at its need (the model
registry's figure for its model, dtype and resolution class, `kernel/model_memory.py`), so the
needs of all the GPU's jobs must fit its memory, less a margin for the CUDA contexts. Time:
jobs on one GPU slow one another, so a job joins only if every job on the GPU, itself included,
still meets its deadline at the slowed pace.

The pace of jobs sharing a GPU (`SharingPace`): a step is compute, which the GPU's jobs
contend for, and a fixed latency per step (kernel launches, the scheduler, synchronisations),
which overlaps another job's compute. So a job's step while sharing takes its own latency plus
the compute of every job's step on the GPU. A large render is almost all compute: sharing
gains nothing and doubles its time. A small one leaves the GPU idle between kernels, which a
neighbour fills. `benchmarks/gpu_sharing.py` measures both on a real GPU; its figures replace
the latency share here as they come in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

# GPU memory no job may be given: every process's CUDA context and the allocator's slack.
MEMORY_MARGIN_GIB = 1.0
# The share of a step that is latency rather than compute, for a render of this many tokens
# or fewer (a 256x448 video of 17 frames has 2,240); larger renders are all compute.
SMALL_RENDER_TOKENS = 4_096
SMALL_RENDER_LATENCY_SHARE = 0.4


@dataclass(frozen=True)
class Tenant:
    """A job on a GPU, or one that would join it."""

    job_id: str
    need_gib: float  # GPU memory its render process is capped at
    seconds_per_step: float  # alone on this GPU
    steps_left: int
    deadline: datetime | None
    tokens: int  # of its video (`kernel.step_time.tokens`): how much of a step is compute


@dataclass(frozen=True)
class SharedGpu:
    worker_id: str
    index: int
    memory_gib: float
    tenants: tuple[Tenant, ...] = ()


@dataclass(frozen=True)
class SharingPace:
    """Seconds per step of each job on a GPU with others (see the module's docstring)."""

    small_tokens: int = SMALL_RENDER_TOKENS
    small_latency_share: float = SMALL_RENDER_LATENCY_SHARE

    def latency(self, tenant: Tenant) -> float:
        share = self.small_latency_share if tenant.tokens <= self.small_tokens else 0.0
        return tenant.seconds_per_step * share

    def shared_step(self, tenant: Tenant, on_gpu: Sequence[Tenant]) -> float:
        """`tenant`'s seconds per step beside `on_gpu` (which holds it too)."""
        compute = sum(t.seconds_per_step - self.latency(t) for t in on_gpu)
        return max(tenant.seconds_per_step, self.latency(tenant) + compute)


@dataclass(frozen=True)
class SharingSample:
    """One row of `benchmarks/gpu_sharing.py`: a video shape's seconds per step alone and
    with `jobs` jobs of it on the GPU."""

    tokens: int
    alone: float
    jobs: int
    shared: float


def latency_share(sample: SharingSample) -> float:
    """The share of a step that overlaps a neighbour's, from a measurement: with k jobs a step
    takes L + k x C where alone it takes L + C, so C = (shared - alone) / (k - 1)."""
    if sample.jobs < 2 or sample.alone <= 0:
        raise ValueError("a sharing sample needs two jobs or more and a time alone")
    compute = (sample.shared - sample.alone) / (sample.jobs - 1)
    return min(1.0, max(0.0, 1.0 - compute / sample.alone))


def pace_from(
    samples: Sequence[SharingSample], small_tokens: int = SMALL_RENDER_TOKENS
) -> SharingPace:
    """The pace the GPU measured: the least latency share among its renders of `small_tokens`
    or fewer (the least a neighbour gains, so no deadline is promised on a better case)."""
    small = [latency_share(s) for s in samples if s.tokens <= small_tokens]
    return SharingPace(small_tokens, min(small) if small else 0.0)


def memory_free_gib(gpu: SharedGpu) -> float:
    return gpu.memory_gib - MEMORY_MARGIN_GIB - sum(t.need_gib for t in gpu.tenants)


def why_not_join(
    gpu: SharedGpu, joining: Tenant, now: datetime, pace: SharingPace = SharingPace()
) -> str | None:
    """None when `joining` may render on `gpu` beside its tenants; else why not."""
    if joining.need_gib > memory_free_gib(gpu):
        return (
            f"needs {joining.need_gib:.1f} GiB, {max(0.0, memory_free_gib(gpu)):.1f} GiB free "
            f"on GPU {gpu.index} of {gpu.worker_id}"
        )
    together = (*gpu.tenants, joining)
    for tenant in together:
        if tenant.deadline is None:
            continue
        finish = now + timedelta(seconds=tenant.steps_left * pace.shared_step(tenant, together))
        if finish > tenant.deadline:
            who = "it" if tenant is joining else f"job {tenant.job_id}"
            return f"sharing GPU {gpu.index} of {gpu.worker_id} would make {who} miss its deadline"
    return None


def best_gpu_to_join(
    gpus: Sequence[SharedGpu], joining: Tenant, now: datetime, pace: SharingPace = SharingPace()
) -> SharedGpu | None:
    """Of the GPUs the job may join, the one where it is slowed least; among equals the one
    it fills best (the least memory left over), then by worker and index."""
    allowed = [gpu for gpu in gpus if why_not_join(gpu, joining, now, pace) is None]
    if not allowed:
        return None
    return min(
        allowed,
        key=lambda gpu: (
            pace.shared_step(joining, (*gpu.tenants, joining)),
            memory_free_gib(gpu) - joining.need_gib,
            gpu.worker_id,
            gpu.index,
        ),
    )
