"""The scheduler's snapshots built from stored jobs, their reservations and the registry."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from kernel.deadline_risk import start_by
from kernel.job_record import JobRecord, Placement, Reservation
from kernel.job_state import JobState
from kernel.render_stage import stage_need_gib, warm_key
from orchestrator.scheduling.registry import WorkerRegistry
from orchestrator.scheduling.snapshots import PendingJob, RunningJob, Work


def steps_left(job: JobRecord) -> int:
    """Steps after its newest checkpoint (what a restart would have to do again)."""
    return job.spec.steps - job.checkpoint_step


def work_of(job: JobRecord) -> Work:
    spec = job.spec
    return Work(spec.model, spec.width, spec.height, spec.num_frames, steps_left(job))


def can_restart(job: JobRecord, reservation: Reservation | None, now: datetime) -> bool:
    """Could the job be stopped and started again elsewhere and still meet its deadline?
    Not once its deadline could no longer take an interruption (it may be on the on-demand
    GPU bought for exactly that)."""
    until = reservation.spot_until(job.deadline, steps_left(job)) if reservation else None
    return until is None or now <= until


@dataclass(frozen=True)
class QueueReads:
    """How much of the queue a tick reads: the most urgent and the oldest jobs (see
    `JobStore.schedulable`), `per_free_gpu` for each free GPU, so that jobs that do not fit
    one still leave others that do; never fewer than `least` (preemption and aging look at
    the queue's head when nothing is free) nor more than `most`. Every reserved job and every
    job whose deadline is at risk (its latest start within `startup`, at most `at_risk_most`)
    come besides, whatever the window."""

    least: int = 200
    most: int = 2000
    per_free_gpu: int = 4
    at_risk_most: int = 10_000
    # A start-up and the wait for a GPU to free: how early a deadline job counts as at risk.
    startup: timedelta = timedelta(seconds=1800)

    def read(self, free_gpus: int) -> tuple[int, timedelta, int]:
        """What `schedulable` is asked for: the window, the start-up, the at-risk bound."""
        return self.window(free_gpus), self.startup, self.at_risk_most

    def window(self, free_gpus: int) -> int:
        """A full fleet with a queue of 10,000 reads 200 of them, not 2,000, five times a
        second."""
        return min(self.most, max(self.least, self.per_free_gpu * free_gpus))


def pending_jobs(
    queued: list[JobRecord],
    reserved: dict[str, Reservation],
    registry: WorkerRegistry,
    now: datetime,
    freed_for: Mapping[str, set[str]] | None = None,
    faulted_on: Mapping[str, set[str]] | None = None,
    default_team: str = "default",
) -> list[PendingJob]:
    """`freed_for`: job -> workers where a preemption freed a GPU for it (its to take);
    `faulted_on`: job -> workers an earlier attempt failed on through the worker's fault;
    `default_team`: the team of the jobs that name none."""
    pending = []
    for job in queued:
        reservation = reserved.get(job.job_id)
        holds = reservation is not None and reservation.holds(now)
        pending.append(
            PendingJob(
                job.job_id,
                job.priority,
                job.deadline,
                job.created_at,
                stage_need_gib(job.spec, job.stage),
                job.families(),
                reserved_on=frozenset(
                    registry.by_instance(reservation.instance_id) if reservation and holds else ()
                )
                | (freed_for or {}).get(job.job_id, set()),
                on_demand_only=holds and reservation is not None and reservation.on_demand,
                avoid=frozenset((faulted_on or {}).get(job.job_id, ())),
                capacity_coming=holds,
                spot_until=reservation.spot_until(job.deadline, steps_left(job))
                if reservation
                else None,
                model=warm_key(job.spec.model, job.stage),
                start_by=start_by(
                    job.spec,
                    steps_left(job),
                    reservation.seconds_per_step if reservation else None,
                    job.families(),
                ),
                team=job.spec.tags.team or default_team,
                gpus=job.spec.gpu.count,
                work=work_of(job),
            )
        )
    return pending


def running_jobs(
    placements: list[Placement],
    reserved: dict[str, Reservation],
    now: datetime,
    default_team: str = "default",
) -> dict[tuple[str, int], RunningJob]:
    """Each busy (worker, GPU): every GPU of a job that spans several is busy with it."""
    return {
        (p.worker_id, gpu_index): RunningJob(
            p.job.job_id,
            p.job.priority,
            p.job.deadline,
            p.since,
            preemptible=p.job.state is JobState.RUNNING
            and can_restart(p.job, reserved.get(p.job.job_id), now),
            team=p.job.spec.tags.team or default_team,
            work=work_of(p.job),
        )
        for p in placements
        for gpu_index in p.gpus
    }


Slot = tuple[str, int]  # (worker, GPU index)


def freeing_now(
    freeing: Mapping[Slot, str], queued: list[JobRecord], placements: list[Placement]
) -> tuple[dict[Slot, str], dict[Slot, str], dict[str, set[str]]]:
    """A preemption frees one GPU for one job. Given the GPUs being freed (slot -> the job it
    is freed for), returns the ones still to remember (their job still queued), those held
    (the victim still checkpoints there: no second victim is evicted for the job), and for
    each job the workers where its GPU is now free (its to take first)."""
    waiting = {job.job_id for job in queued}
    kept = {slot: job for slot, job in freeing.items() if job in waiting}
    busy = {(p.worker_id, gpu_index) for p in placements for gpu_index in p.gpus}
    held = {slot: job for slot, job in kept.items() if slot in busy}
    freed_for: dict[str, set[str]] = {}
    for (worker_id, gpu_index), job_id in kept.items():
        if (worker_id, gpu_index) not in busy:
            freed_for.setdefault(job_id, set()).add(worker_id)
    return kept, held, freed_for
