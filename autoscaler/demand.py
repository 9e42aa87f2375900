"""What the control plane's database says the autoscaler must serve: queued jobs with their
progress, and how many GPUs each instance has busy (a worker's id is its instance id)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from datetime import datetime

from autoscaler.snapshot import JobDemand
from autoscaler.throughput import WorkShape
from orchestrator.domain.job_record import JobRecord, Reservation
from orchestrator.domain.job_spec import JobSpec
from orchestrator.store.job_store import JobStore

_STEP = re.compile(r"/(\d+)/(\d{6})/manifest\.json$")


def steps_done(checkpoint_key: str | None) -> int:
    """Steps behind the newest durable checkpoint (`.../{attempt}/{step:06d}/manifest.json`)."""
    found = _STEP.search(checkpoint_key or "")
    return int(found.group(2)) if found else 0


def demand_of(
    spec: JobSpec, submitted_at: datetime, deadline: datetime | None, done: int = 0
) -> JobDemand:
    return JobDemand(
        job_id=spec.job_id,
        priority=spec.priority,
        submitted_at=submitted_at,
        deadline=deadline,
        shape=WorkShape(spec.model, spec.width, spec.height, spec.num_frames),
        steps_total=spec.steps,
        steps_done=min(done, spec.steps),
        min_vram_gib=spec.gpu.min_vram_gib,
        families=frozenset(f.value for f in spec.gpu.families),
    )


def job_demand(job: JobRecord) -> JobDemand:
    return demand_of(job.spec, job.created_at, job.deadline, steps_done(job.last_checkpoint))


class StoreDemand:
    def __init__(self, store: JobStore) -> None:
        self._store = store

    def queued(self, now: datetime) -> list[JobDemand]:
        return [job_demand(job) for job in self._store.schedulable(now)]

    def reserve(self, reservations: Sequence[Reservation]) -> None:
        if reservations:
            self._store.reserve(reservations)

    def reservations(self, now: datetime) -> dict[str, str]:
        """job -> the instance reserved for it."""
        held = self._store.reservations(now)
        return {job_id: r.instance_id for job_id, r in held.items() if r.instance_id}

    def busy_gpus(self) -> Counter[str]:
        return Counter(p.worker_id for p in self._store.placements())
