"""A claim the scheduler can see will never be used lapses at once (issue 46, defect 2): the
instance the autoscaler bought for a job is up, and none of its slots holds the job however
freed (turns on a shared GPU or MIG slices too small, another family, a worker the job must
avoid, too few for a span). A claim on a worker that can run the job, busy or not, stands."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from orchestrator.scheduling.fit import unfit_claims
from orchestrator.scheduling.snapshots import GpuSlot, PendingJob, RunningJob, WorkerSnapshot

NOW = datetime(2026, 12, 7, tzinfo=UTC)


def claimed(job_id: str, worker_id: str, need: float, gpus: int = 1) -> PendingJob:
    job = PendingJob(job_id, 5, None, NOW, need, reserved_on=frozenset({worker_id}))
    return replace(job, gpus=gpus)


def shared_l40s(worker_id: str) -> WorkerSnapshot:
    turns = tuple(
        GpuSlot(worker_id, i, "l40s", 44.99 / 2, physical=0, time_shared=True) for i in range(2)
    )
    return WorkerSnapshot(worker_id, turns)


def test_a_claim_on_slots_too_small_lapses_and_one_that_fits_stands() -> None:
    busy = RunningJob("other", 5, None, NOW)
    whole = WorkerSnapshot("whole", (GpuSlot("whole", 0, "l40s", 44.99, busy),))
    jobs = [
        claimed("denoise-36", "shared", 36.1),  # a 22.5 GiB turn never holds it
        claimed("small", "shared", 15.0),
        claimed("waits-its-turn", "whole", 36.1),  # busy now, fits once free
        claimed("span", "whole", 20.0, gpus=2),  # one GPU there: never two
        replace(claimed("avoids", "whole", 10.0), avoid=frozenset({"whole"})),
        claimed("booting", "not-up-yet", 80.0),  # no hello yet: nothing to judge by
    ]
    assert unfit_claims(jobs, [shared_l40s("shared"), whole]) == ["denoise-36", "span", "avoids"]
    draining = replace(shared_l40s("shared"), accepting=False)
    assert unfit_claims(jobs[:1], [draining]) == []  # a draining worker's claims are moot
