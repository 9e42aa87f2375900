"""Jobs that span several GPUs (`gpu.count` > 1): each gets its GPUs as a gang, all of one
instance and all at once, or none. A pure rule over a snapshot of the workers.

A gang never holds some of its GPUs while it waits for the rest: that is how two gangs each
holding half of what the other needs wait for ever. Instead, a gang that finds no worker with
enough free GPUs holds one whole worker: the one where enough of its GPUs free soonest. Nothing
new starts on a held worker, so its running jobs end (they finish, or are moved off through a
checkpoint), and once enough of its GPUs are free together the gang takes them in one move.
Each worker is held by one gang at most, gangs hold in queue order and a hold waits only on
running jobs, never on another waiting job: no cycle of waits can form.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from kernel.gpu_fit import gpu_fits


@dataclass(frozen=True)
class GangGpu:
    index: int
    family: str
    vram_gib: float
    # None: free now; else when the job on it is expected to end (its steps left at its pace).
    busy_until: datetime | None = None


@dataclass(frozen=True)
class GangWorker:
    worker_id: str
    gpus: tuple[GangGpu, ...]


@dataclass(frozen=True)
class GangJob:
    job_id: str
    gpus: int
    min_vram_gib: float
    families: frozenset[str] = frozenset()  # empty: any family

    def fits(self, gpu: GangGpu) -> bool:
        return gpu_fits(gpu.family, gpu.vram_gib, self.min_vram_gib, self.families)


@dataclass(frozen=True)
class GangPlan:
    # job -> (worker, the GPUs it takes): every one of them free now.
    starts: dict[str, tuple[str, tuple[int, ...]]] = field(default_factory=dict)
    # worker -> the gang it is held for: no other job starts there.
    holds: dict[str, str] = field(default_factory=dict)
    # job -> why it neither starts nor holds a worker.
    waits: dict[str, str] = field(default_factory=dict)


def plan_gangs(
    jobs: Sequence[GangJob],
    workers: Sequence[GangWorker],
    now: datetime,
    held_before: Mapping[str, str] | None = None,
) -> GangPlan:
    """`jobs` in queue order. A worker's free GPUs a gang takes, or a worker a gang holds, are
    no one else's this tick. `held_before`: the last tick's holds; a gang keeps the worker it
    held while that worker can still take it, so a gang is never sent from one worker that is
    emptying to another."""
    kept = {job_id: worker_id for worker_id, job_id in (held_before or {}).items()}
    plan = GangPlan()
    taken: dict[str, set[int]] = {}
    for job in jobs:
        placed = _start(job, workers, taken, plan.holds)
        if placed is not None:
            worker_id, indexes = placed
            plan.starts[job.job_id] = placed
            taken.setdefault(worker_id, set()).update(indexes)
            continue
        if job.gpus == 1:  # a one-GPU job takes the next free GPU: it holds nothing
            plan.waits[job.job_id] = "no free GPU that fits it"
            continue
        held = _hold(job, workers, taken, plan.holds, now, kept.get(job.job_id))
        if held is not None:
            plan.holds[held] = job.job_id
        elif any(sum(job.fits(g) for g in w.gpus) >= job.gpus for w in workers):
            plan.waits[job.job_id] = "waits for an instance that gangs before it hold"
        else:
            plan.waits[job.job_id] = f"no instance has {job.gpus} GPUs that fit it"
    return plan


def _start(
    job: GangJob,
    workers: Sequence[GangWorker],
    taken: dict[str, set[int]],
    holds: dict[str, str],
) -> tuple[str, tuple[int, ...]] | None:
    """The worker with enough free GPUs that fit, the one left with the fewest free after it
    (the larger free blocks stay for larger gangs); None if there is none."""
    best: tuple[int, str, tuple[int, ...]] | None = None
    for worker in workers:
        if holds.get(worker.worker_id, job.job_id) != job.job_id:
            continue
        free = [
            g.index
            for g in sorted(worker.gpus, key=lambda g: g.index)
            if g.busy_until is None
            and g.index not in taken.get(worker.worker_id, ())
            and job.fits(g)
        ]
        if len(free) < job.gpus:
            continue
        candidate = (len(free) - job.gpus, worker.worker_id, tuple(free[: job.gpus]))
        if best is None or candidate < best:
            best = candidate
    return (best[1], best[2]) if best is not None else None


def _hold(
    job: GangJob,
    workers: Sequence[GangWorker],
    taken: dict[str, set[int]],
    holds: dict[str, str],
    now: datetime,
    held_before: str | None,
) -> str | None:
    """The worker not yet held (and untouched this tick) where `job.gpus` of its fitting GPUs
    are free soonest, the one it held before first; None if no worker has that many."""
    best: tuple[bool, datetime, str] | None = None
    for worker in workers:
        if worker.worker_id in holds or taken.get(worker.worker_id):
            continue
        ends = sorted(g.busy_until or now for g in worker.gpus if job.fits(g))
        if len(ends) < job.gpus:
            continue
        candidate = (worker.worker_id != held_before, ends[job.gpus - 1], worker.worker_id)
        if best is None or candidate < best:
            best = candidate
    return best[2] if best is not None else None
